-- name: WebhookDeadList :many
-- Dead-lettered webhook deliveries, oldest first.
SELECT id, tenant_id, settlement_id, outbox_id, attempts, failures, coalesce(last_status, 0) AS last_status, last_error, dead_at
  FROM webhook_dead_letters
 ORDER BY id
 LIMIT @max_rows::integer;
