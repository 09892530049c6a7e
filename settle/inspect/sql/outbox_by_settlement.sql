-- name: OutboxBySettlement :many
-- The outbox rows that publish one settlement. The settling transaction
-- writes them with the identity, so their created_at is the identity's
-- committed_at (both now() of that transaction): $3 narrows the search;
-- the header match decides. $2 is the settlement id in base64, as headers
-- are stored.
SELECT m.id, m.topic, m.created_at, m.published, m.parked
  FROM outbox_messages m
 WHERE m.created_at = $3
   AND m.topic = $1
   AND m.headers @> jsonb_build_array(jsonb_build_object('key', 'settlement_id', 'value', $2::text))
 ORDER BY m.id;
