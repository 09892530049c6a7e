-- name: ReconcileOutboxParked :many
-- Outbox rows the relay parked: the broker refused them for good; the
-- settlement id of those on the settlements topic (settlements_topic).
SELECT p.id, m.topic::text AS topic, p.reason, p.error, p.at,
       CASE WHEN m.topic = @settlements_topic THEN coalesce(convert_from(m.value, 'UTF8')::jsonb ->> 'settlement_id', '') ELSE '' END::text AS settlement_id
  FROM outbox_parked p
  JOIN outbox_messages m ON m.tenant_id = p.tenant_id AND m.id = p.id
 ORDER BY p.id
 LIMIT 10000;
