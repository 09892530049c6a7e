-- name: ReconcileOutboxUnpublished :many
-- Outbox rows still unpublished after the grace period (grace_seconds),
-- with the settlement id of those on the settlements topic
-- (settlements_topic). A parked row is not waiting for the relay:
-- reconcile_outbox_parked.sql reports it.
SELECT id::bigint AS id, topic::text AS topic, created_at::timestamptz AS created_at,
       CASE WHEN topic = @settlements_topic THEN coalesce(convert_from(value, 'UTF8')::jsonb ->> 'settlement_id', '') ELSE '' END::text AS settlement_id
  FROM outbox_messages
 WHERE NOT published AND NOT parked
   AND created_at < now() - make_interval(secs => sqlc.arg(grace_seconds)::float8)
 ORDER BY id
 LIMIT 10000;
