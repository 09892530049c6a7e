-- name: OutboxInsert :exec
-- The outbox has two writers (settle/schema): the settling transaction
-- inserts its rows (this file, outbox_settlements_insert.sql), and the
-- relay owns them after (relay/outbox/sql).
--
-- The messages of a transaction that are not settlements (dead letters,
-- the results that go through the outbox), each with its value and every
-- header; @tenant_id is each row's tenant ('' for a dead letter). The
-- trigger outbox_enqueue puts every row on the relay's queue. Settlements
-- are written by outbox_settlements_insert.sql.
INSERT INTO outbox (topic, key, value, headers, tenant_id)
SELECT k.topic, k.key, k.value, k.headers, k.tenant_id
  FROM unnest(@topic::text[], @key::bytea[], @value::bytea[], @headers::jsonb[], @tenant_id::text[])
       AS k (topic, key, value, headers, tenant_id);
