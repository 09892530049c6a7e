-- name: WaitingOfSubject :many
-- The records of one subject of a tenant still waiting for their target,
-- oldest first: the account page's waiting records, found by
-- waiting_subject (the subject of the record's canonical form, migration
-- 25). Bounded by rows_max.
SELECT w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id, w.since,
       coalesce(convert_from(w.canonical, 'UTF8')::jsonb ->> 'currency', '')::text AS currency
  FROM waiting w
 WHERE w.status = 'waiting' AND w.tenant_id = sqlc.arg(tenant)
   AND settle_canonical_subject(w.canonical) = sqlc.arg(subject)::text
 ORDER BY w.since, w.id
 LIMIT sqlc.arg(rows_max);
