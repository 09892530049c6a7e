-- name: OutboxBySettlement :many
-- The outbox rows that publish one settlement. The settling transaction
-- writes them with the identity, so their created_at is the identity's
-- committed_at (both now() of that transaction): committed_at narrows the
-- search; the header match decides. settlement_id_base64 is the settlement
-- id in base64, as headers are stored. (The view's columns are cast for
-- sqlc, which cannot type them.)
SELECT m.id, m.topic, m.created_at::timestamptz AS created_at, m.published::boolean AS published,
       m.parked::boolean AS parked
  FROM outbox_messages m
 WHERE m.created_at = sqlc.arg(committed_at)::timestamptz
   AND m.topic = sqlc.arg(topic)
   AND m.headers @> jsonb_build_array(jsonb_build_object('key', 'settlement_id', 'value', sqlc.arg(settlement_id_base64)::text))
 ORDER BY m.id;
