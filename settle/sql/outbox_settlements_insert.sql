-- name: OutboxSettlementsInsert :batchmany
-- The settlements of a transaction, in order: one outbox_settlements row
-- per tenant, its arrays holding each settlement's outbox id, identity,
-- message key, sequence, kind and stored (trace) headers. The message is
-- the identity's stored response, its headers the identity's
-- settlement_id and tenant_id, the sequence, kind and version, then the
-- stored ones (outbox_messages). The outbox ids are reserved as identity
-- ids are (settle_reserve: a block per nextval of the outbox's sequence),
-- and the settlements take them in order, while the transaction holds its
-- accounts' locks (per-account order). A row's id is its first. The
-- trigger outbox_settlements_enqueue queues every row for the relay.
-- Returns each row's ids with their identities', for the messages this
-- process keeps for its relay (settle.Store.WrittenMessage).
WITH r AS (
    SELECT settle_reserve(pg_get_serial_sequence('public.outbox', 'id')::regclass, cardinality(@identity_id::bigint[])) AS ids
), k AS (
    SELECT k.tenant_id, k.identity_id, k.key, k.sequence, k.kind, k.headers, k.n, r.ids[k.n] AS id
      FROM r, unnest(@tenant_id::text[], @identity_id::bigint[], @key::bytea[], @sequence::bigint[], @kind::text[], @headers::jsonb[])
           WITH ORDINALITY AS k (tenant_id, identity_id, key, sequence, kind, headers, n)
)
INSERT INTO outbox_settlements (tenant_id, id, topic, version, ids, identity_ids, keys, sequences, kinds, headers)
SELECT k.tenant_id, min(k.id), @topic::text, @version::smallint, array_agg(k.id ORDER BY k.n),
       array_agg(k.identity_id ORDER BY k.n), array_agg(k.key ORDER BY k.n), array_agg(k.sequence ORDER BY k.n),
       array_agg(k.kind ORDER BY k.n), array_agg(k.headers ORDER BY k.n)
  FROM k
 GROUP BY k.tenant_id
RETURNING ids::bigint[] AS ids, identity_ids::bigint[] AS identity_ids;
