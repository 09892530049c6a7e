-- name: OutboxQueueHead :many
-- The relay owns the outbox's rows once they are written; the settling
-- transaction is their other writer, inserting them (settle/sql's
-- outbox_insert.sql and outbox_settlements_insert.sql; settle/schema).
--
-- The oldest queue rows, in the order of their keys (each the first outbox
-- id its statement wrote), each with the outbox ids it names in id order:
-- the relay takes the messages its own process wrote from memory
-- (settle.Store.Written) and reads the others by key (outbox.sql's OutboxPending).
SELECT tenant_id, id, ids FROM outbox_queue ORDER BY id LIMIT @max_rows::integer;

-- name: OutboxMark :exec
-- Takes queue rows off the queue once every message they name was
-- acknowledged by the broker or parked. A row already taken off is not
-- there, so a second marking is harmless.
DELETE FROM outbox_queue q
 USING unnest(@tenant_id::text[], @id::bigint[]) AS k (tenant_id, id)
 WHERE q.id = k.id AND q.tenant_id = k.tenant_id;

-- name: OutboxRequeue :exec
-- Leaves on a queue row only the outbox ids (@ids, in id order) still to
-- publish, when the broker took some of the messages it names and not the
-- others: those it took are not published again on every retry. The row
-- keeps its key, and so its place in the queue.
UPDATE outbox_queue SET ids = @ids::bigint[] WHERE id = @id AND tenant_id = @tenant_id;
