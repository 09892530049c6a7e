-- The outbox rows that publish one settlement. The settling transaction
-- writes them with the identity, so their created_at is the identity's
-- committed_at (both now() of that transaction): $3 narrows the search;
-- the header match decides. $2 is the settlement id in base64, as headers
-- are stored.
SELECT o.id, o.topic, o.created_at, NOT EXISTS (SELECT 1 FROM outbox_queue q WHERE q.id = o.id)
  FROM outbox o
 WHERE o.created_at = $3
   AND o.topic = $1
   AND o.headers @> jsonb_build_array(jsonb_build_object('key', 'settlement_id', 'value', $2::text))
 ORDER BY o.id
