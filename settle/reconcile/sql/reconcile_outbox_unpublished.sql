-- Outbox rows still unpublished after the grace period ($1: seconds). A
-- parked row is not waiting for the relay: reconcile_outbox_parked.sql
-- reports it.
SELECT id, topic, created_at,
       CASE WHEN topic = $2 THEN coalesce(convert_from(value, 'UTF8')::jsonb ->> 'settlement_id', '') ELSE '' END
  FROM outbox_messages
 WHERE NOT published AND NOT parked
   AND created_at < now() - make_interval(secs => $1::float8)
 ORDER BY id
 LIMIT 10000
