-- name: OutboxMark :exec
-- Takes outbox rows off the queue once the broker acknowledged them. A row
-- already taken off is not there, so a second marking is harmless.
DELETE FROM outbox_queue WHERE id = ANY (@ids::bigint[]);
