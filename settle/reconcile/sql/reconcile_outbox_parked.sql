-- Outbox rows the relay parked: the broker refused them for good.
SELECT p.id, m.topic, p.reason, p.error, p.at,
       CASE WHEN m.topic = $1 THEN coalesce(convert_from(m.value, 'UTF8')::jsonb ->> 'settlement_id', '') ELSE '' END
  FROM outbox_parked p
  JOIN outbox_messages m ON m.tenant_id = p.tenant_id AND m.id = p.id
 ORDER BY p.id
 LIMIT 10000
