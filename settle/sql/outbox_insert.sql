-- A settlement's row names its identity ($5, 0 = none) and has no value:
-- the message is the identity's stored response (outbox_messages). The
-- trigger outbox_enqueue puts every row on the relay's queue.
INSERT INTO outbox (topic, key, value, headers, identity_id)
SELECT k.topic, k.key, k.value, k.headers, nullif(k.identity_id, 0)
  FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::jsonb[], $5::bigint[]) AS k (topic, key, value, headers, identity_id)
