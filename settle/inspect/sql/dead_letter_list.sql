-- name: DeadLetterList :many
-- One page of dead letters, oldest first, keyset-paged on id. An empty
-- tenant, reason, topic or error class means any; up_to_id caps the ids read (a
-- replay reads what existed when it started, not the dead letters it
-- causes); not_replayed leaves out those replayed before (a replay by
-- default). replays counts where each was replayed to.
SELECT d.id, d.tenant_id, d.topic, d.partition, d."offset", d.key, d.value, d.headers, d.reason, d.error_class, d.error,
       d.attempts, d.at,
       (SELECT count(*) FROM dead_letter_replays r WHERE r.tenant_id = d.tenant_id AND r.dead_letter_id = d.id)::int AS replays
  FROM dead_letters d
 WHERE (sqlc.arg(tenant)::text = '' OR d.tenant_id = sqlc.arg(tenant))
   AND (sqlc.arg(reason)::text = '' OR d.reason = sqlc.arg(reason))
   AND (NOT sqlc.arg(not_replayed)::boolean
        OR NOT EXISTS (SELECT 1 FROM dead_letter_replays r WHERE r.tenant_id = d.tenant_id AND r.dead_letter_id = d.id))
   AND (sqlc.arg(topic)::text = '' OR d.topic = sqlc.arg(topic))
   AND (sqlc.arg(error_class)::text = '' OR d.error_class = sqlc.arg(error_class))
   AND d.id > sqlc.arg(after_id) AND d.id <= sqlc.arg(up_to_id)
 ORDER BY d.id
 LIMIT sqlc.arg(page_rows);
