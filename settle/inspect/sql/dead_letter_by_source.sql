-- name: DeadLetterBySource :one
-- The dead letter of the input record at these coordinates, of one tenant
-- (dead_letters_source_key): where a replayed record that failed again
-- came from.
SELECT d.id
  FROM dead_letters d
 WHERE d.tenant_id = sqlc.arg(tenant_id) AND d.topic = sqlc.arg(topic) AND d.partition = sqlc.arg(partition)
   AND d."offset" = sqlc.arg(source_offset);
