-- name: OutboxPark :exec
-- Parks outbox rows the broker refused for good: records why. A parked row
-- counts as done for its queue row (OutboxMark, OutboxRequeue), which the
-- relay writes next; parked before, it is left as it is.
INSERT INTO outbox_parked (tenant_id, id, reason, error)
SELECT o.tenant_id, k.id, k.reason, k.error
  FROM unnest(@id::bigint[], @reason::text[], @error::text[]) AS k (id, reason, error)
  JOIN outbox_queue q ON k.id = ANY (q.ids)
  JOIN outbox o ON o.tenant_id = q.tenant_id AND o.id = k.id
    ON CONFLICT (tenant_id, id) DO NOTHING;
