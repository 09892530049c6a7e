-- name: OutboxSettlementsInsert :batchmany
-- The outbox has two writers (settle/schema): the settling transaction
-- inserts its rows (this file, outbox_insert.sql), and the relay owns them
-- after (relay/outbox/sql).
--
-- The settlements of a transaction, in order: a row per tenant and block
-- (at most db.IDBlock settlements; one row per tenant unless a tenant has
-- more), its arrays holding each settlement's outbox id, identity, message
-- key, sequence, kind and stored (trace) headers. Row r is the slice
-- lo..hi of the flat arrays (PostgreSQL arrays start at 1). The message is
-- the identity's stored response, its headers the identity's
-- settlement_id and tenant_id, the sequence, kind and version, then the
-- stored ones (outbox_messages). A row's ids are one block of the outbox's
-- sequence, which steps by db.IDBlock (migration 0015): one nextval v, and
-- the settlements take v .. v+hi-lo in order (the sequence named as a
-- constant, edge/idempotency/sql/idempotency_keys.sql's IdempotencyLookupMany). The rows draw their nextval in the order given
-- (a volatile function of the target list is evaluated after the ORDER
-- BY), while the transaction holds its accounts' locks, so every id of an
-- account's later settlement is above its earlier ones' (per-account
-- order). A row's id is its first. The trigger
-- outbox_settlements_enqueue queues every row for the relay.
-- Returns each row's ids with their identities', for the messages this
-- process keeps for its relay (settle.Store.WrittenMessage).
INSERT INTO outbox_settlements (tenant_id, id, topic, version, ids, identity_ids, keys, sequences, kinds, headers)
SELECT r.tenant_id, r.v, @topic::text, @version::smallint,
       ARRAY(SELECT r.v + i FROM generate_series(0, r.hi - r.lo) AS i),
       (@identity_id::bigint[])[r.lo:r.hi], (@key::bytea[])[r.lo:r.hi], (@sequence::bigint[])[r.lo:r.hi],
       (@kind::text[])[r.lo:r.hi], (@headers::jsonb[])[r.lo:r.hi]
  FROM (SELECT r.tenant_id, r.lo, r.hi, nextval('public.outbox_id_seq'::regclass) AS v
          FROM unnest(@tenant_id::text[], @lo::integer[], @hi::integer[]) WITH ORDINALITY AS r (tenant_id, lo, hi, n)
         ORDER BY r.n) AS r
RETURNING ids::bigint[] AS ids, identity_ids::bigint[] AS identity_ids;
