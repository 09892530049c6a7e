-- name: OutboxBacklog :one
-- How many outbox rows wait to be published, and since when.
SELECT coalesce(sum(cardinality(q.ids)), 0)::bigint AS waiting, coalesce(min(o.created_at), now())::timestamptz AS oldest
  FROM outbox_queue q
  JOIN outbox o ON o.tenant_id = q.tenant_id AND o.id = q.id;
