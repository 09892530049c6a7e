-- name: OutboxParkedList :many
-- One page of parked outbox rows, oldest first, keyset-paged on id, with
-- the size of the message that was refused. (The view's headers are cast
-- for sqlc, which cannot type them.)
SELECT p.id, m.topic, m.key, length(m.value) AS value_bytes, m.headers::jsonb AS headers, p.reason, p.error,
       m.created_at, p.at
  FROM outbox_parked p
  JOIN outbox_messages m ON m.tenant_id = p.tenant_id AND m.id = p.id
 WHERE p.id > sqlc.arg(after_id)
 ORDER BY p.id
 LIMIT sqlc.arg(page_rows);
