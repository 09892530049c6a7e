-- name: OutboxMark :exec
-- Takes queue rows off the queue once every message they name was
-- acknowledged by the broker or parked. A row already taken off is not
-- there, so a second marking is harmless.
DELETE FROM outbox_queue q
 USING unnest(@tenant_id::text[], @id::bigint[]) AS k (tenant_id, id)
 WHERE q.id = k.id AND q.tenant_id = k.tenant_id;
