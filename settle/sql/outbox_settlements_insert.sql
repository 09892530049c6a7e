-- name: OutboxSettlementsInsert :batchmany
-- The settlements of a transaction, in order: one outbox_settlements row
-- per tenant, its arrays holding each settlement's outbox id, identity,
-- message key, sequence, kind and stored (trace) headers. The message is
-- the identity's stored response, its headers the identity's
-- settlement_id and tenant_id, the sequence, kind and version, then the
-- stored ones (outbox_messages). The outbox ids are reserved as identity
-- ids are (identity_reserve.sql): the outbox's sequence steps by a block
-- (migration 0015), one nextval v reserves v .. v+step-1, and the
-- settlements take them in order, while the transaction holds its
-- accounts' locks (per-account order). A row's id is its first. The
-- trigger outbox_settlements_enqueue queues every row for the relay.
-- Returns each row's ids with their identities', for the messages this
-- process keeps for its relay (settle.Store.WrittenMessage).
WITH s AS (
    SELECT q.seqrelid::regclass AS seq, q.seqincrement AS step
      FROM pg_sequence q
     WHERE q.seqrelid = pg_get_serial_sequence('public.outbox', 'id')::regclass
), b AS MATERIALIZED (
    SELECT g, nextval(s.seq) AS v
      FROM s CROSS JOIN generate_series(1, ceil(cardinality(@identity_id::bigint[])::numeric / s.step)::integer) AS g
), blocks AS (
    SELECT array_agg(b.v ORDER BY b.g) AS vs, (SELECT step FROM s) AS step FROM b
), k AS (
    SELECT k.tenant_id, k.identity_id, k.key, k.sequence, k.kind, k.headers, k.n,
           (blocks.vs[(k.n - 1) / blocks.step + 1] + (k.n - 1) % blocks.step)::bigint AS id
      FROM blocks, unnest(@tenant_id::text[], @identity_id::bigint[], @key::bytea[], @sequence::bigint[], @kind::text[], @headers::jsonb[])
           WITH ORDINALITY AS k (tenant_id, identity_id, key, sequence, kind, headers, n)
)
INSERT INTO outbox_settlements (tenant_id, id, topic, version, ids, identity_ids, keys, sequences, kinds, headers)
SELECT k.tenant_id, min(k.id), @topic::text, @version::smallint, array_agg(k.id ORDER BY k.n),
       array_agg(k.identity_id ORDER BY k.n), array_agg(k.key ORDER BY k.n), array_agg(k.sequence ORDER BY k.n),
       array_agg(k.kind ORDER BY k.n), array_agg(k.headers ORDER BY k.n)
  FROM k
 GROUP BY k.tenant_id
RETURNING ids::bigint[] AS ids, identity_ids::bigint[] AS identity_ids;
