-- name: OutboxPark :exec
-- Parks outbox rows the broker refused for good, each by its key
-- (@tenant_id, @id): records why. A parked row counts as done for its queue
-- row (OutboxMark, OutboxRequeue), which the relay writes next; parked
-- before, it is left as it is.
INSERT INTO outbox_parked (tenant_id, id, reason, error)
SELECT k.tenant_id, k.id, k.reason, k.error
  FROM unnest(@tenant_id::text[], @id::bigint[], @reason::text[], @error::text[]) AS k (tenant_id, id, reason, error)
    ON CONFLICT (tenant_id, id) DO NOTHING;
