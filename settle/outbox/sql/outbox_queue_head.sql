-- name: OutboxQueueHead :many
-- The oldest queued outbox rows' keys, in id order (the order their
-- transactions wrote them): the relay takes the messages its own process
-- wrote from memory (settle.Store.Written) and reads the others by key
-- (outbox_pending.sql).
SELECT tenant_id, id FROM outbox_queue ORDER BY id LIMIT @max_rows::integer;
