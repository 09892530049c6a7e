-- name: OutboxPark :exec
-- Parks outbox rows the broker refused for good: records why and takes
-- them off the queue, in one statement. A row no longer on the queue (a
-- second relay's mark, or parked before) is left as it is.
WITH k AS (
    SELECT * FROM unnest(@id::bigint[], @reason::text[], @error::text[]) AS k (id, reason, error)
), taken AS (
    DELETE FROM outbox_queue q USING k WHERE q.id = k.id RETURNING q.tenant_id, q.id
)
INSERT INTO outbox_parked (tenant_id, id, reason, error)
SELECT t.tenant_id, k.id, k.reason, k.error
  FROM k JOIN taken t ON t.id = k.id
    ON CONFLICT (tenant_id, id) DO NOTHING;
