-- name: Attention :one
-- What the overview puts first, of one tenant ('' = every tenant but
-- hidden, the canary's): the
-- dead letters written since since, and the records still waiting for
-- their target with the oldest one's wait in seconds, 0 for none
-- and which record that is (waiting_since indexes them).
SELECT (SELECT count(*) FROM dead_letters d
         WHERE d.at >= sqlc.arg(since)::timestamptz
           AND (sqlc.arg(tenant)::text = '' AND d.tenant_id <> sqlc.arg(hidden)::text OR d.tenant_id = sqlc.arg(tenant)))::bigint AS dead_letters_since,
       (SELECT count(*) FROM waiting w
         WHERE w.status = 'waiting' AND (sqlc.arg(tenant)::text = '' AND w.tenant_id <> sqlc.arg(hidden)::text OR w.tenant_id = sqlc.arg(tenant)))::bigint AS waiting,
       (SELECT coalesce(extract(epoch FROM now() - min(w.since)), 0) FROM waiting w
         WHERE w.status = 'waiting' AND (sqlc.arg(tenant)::text = '' AND w.tenant_id <> sqlc.arg(hidden)::text OR w.tenant_id = sqlc.arg(tenant)))::bigint AS oldest_waiting_seconds,
       coalesce((SELECT ARRAY[w.tenant_id, w.account_period, w.record_id] FROM waiting w
         WHERE w.status = 'waiting' AND (sqlc.arg(tenant)::text = '' AND w.tenant_id <> sqlc.arg(hidden)::text OR w.tenant_id = sqlc.arg(tenant))
         ORDER BY w.since, w.id LIMIT 1), '{}')::text[] AS oldest_waiting;
