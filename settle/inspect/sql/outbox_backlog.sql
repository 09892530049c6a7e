-- name: OutboxBacklog :one
-- How many messages wait to be published, and since when (a queue row's
-- key is its first message: an outbox row, or an outbox_settlements row).
SELECT coalesce(sum(cardinality(q.ids)), 0)::bigint AS waiting,
       coalesce(min(coalesce(o.created_at, s.created_at)), now())::timestamptz AS oldest
  FROM outbox_queue q
  LEFT JOIN outbox o ON o.tenant_id = q.tenant_id AND o.id = q.id
  LEFT JOIN outbox_settlements s ON s.tenant_id = q.tenant_id AND s.id = q.id;
