-- name: DeadLetterList :many
-- One page of dead letters, oldest first, keyset-paged on id. An empty
-- reason, topic or error class means any; up_to_id caps the ids read (a
-- replay reads what existed when it started, not the dead letters it
-- causes).
SELECT d.id, d.topic, d.partition, d."offset", d.key, d.value, d.headers, d.reason, d.error_class, d.error,
       d.attempts, d.at
  FROM dead_letters d
 WHERE (sqlc.arg(reason)::text = '' OR d.reason = sqlc.arg(reason))
   AND (sqlc.arg(topic)::text = '' OR d.topic = sqlc.arg(topic))
   AND (sqlc.arg(error_class)::text = '' OR d.error_class = sqlc.arg(error_class))
   AND d.id > sqlc.arg(after_id) AND d.id <= sqlc.arg(up_to_id)
 ORDER BY d.id
 LIMIT sqlc.arg(page_rows);
