-- name: OutboxQueueHead :many
-- The oldest queue rows, in the order of their keys (each the first outbox
-- id its statement wrote), each with the outbox ids it names in id order:
-- the relay takes the messages its own process wrote from memory
-- (settle.Store.Written) and reads the others by key (outbox_pending.sql).
SELECT tenant_id, id, ids FROM outbox_queue ORDER BY id LIMIT @max_rows::integer;
