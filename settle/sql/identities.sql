-- name: IdentityCopy :copyfrom
-- The identities first seen in a batch, written with COPY: append-only rows,
-- the widest of the transaction, for which COPY costs a fraction of an
-- INSERT ... SELECT FROM unnest (BENCHMARKS.md, "WAL per record"). A
-- concurrent claim of the same identity fails it on
-- identities_scope_key, as an insert would.
INSERT INTO identities (id, tenant_id, account_period, record_id, operation, fingerprint,
                        canonical_version, canonical, outcome, reason, response, settlement_id,
                        account_id, root_id, source, attributes, topic, partition, "offset",
                        first_seen_at, last_attempted_at, attempts, subject, currency, target_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23,
        $24, $25);

-- name: IdentityInsert :exec
-- The identities first seen in a small batch, in the batch's last pipeline
-- (a group of the HTTP edge, a quiet stream): the rows identity_copy.sql
-- writes with COPY, whose statement and two round trips cost more than a
-- few rows. Null columns come as 0 or ''. A concurrent claim of the same
-- identity fails it on identities_scope_key, as the COPY would.
INSERT INTO identities (id, tenant_id, account_period, record_id, operation, fingerprint,
                        canonical_version, canonical, outcome, reason, response, settlement_id,
                        account_id, root_id, source, attributes, topic, partition, "offset",
                        first_seen_at, last_attempted_at, attempts, subject, currency, target_id)
SELECT k.id, k.tenant_id, k.account_period, k.record_id, k.operation, k.fingerprint, k.canonical_version, k.canonical,
       k.outcome, k.reason, k.response, nullif(k.settlement_id, ''), nullif(k.account_id, 0), nullif(k.root_id, 0),
       k.source, k.attributes, k.topic, k.partition, k."offset", @first_seen_at::timestamptz,
       @last_attempted_at::timestamptz, @attempts::integer, k.subject, k.currency, nullif(k.target_id, 0)
  FROM unnest(@id::bigint[], @tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[],
              @fingerprint::bigint[], @canonical_version::smallint[], @canonical::bytea[], @outcome::text[],
              @reason::text[], @response::json[], @settlement_id::text[], @account_id::bigint[], @root_id::bigint[],
              @source::text[], @attributes::jsonb[], @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[],
              @subject::text[], @currency::text[], @target_id::bigint[])
       AS k (id, tenant_id, account_period, record_id, operation, fingerprint, canonical_version, canonical, outcome,
             reason, response, settlement_id, account_id, root_id, source, attributes, topic, partition, "offset",
             subject, currency, target_id);

-- name: IdentityLookup :batchmany
-- Identities of a batch that are already settled (same columns as
-- target_lookup.sql).
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome, i.reason,
       i.fingerprint, i.canonical_version, i.canonical, i.response, coalesce(i.settlement_id, ''),
       i.subject, i.currency, coalesce(i.account_id, 0), coalesce(i.root_id, 0),
       i.topic, i.partition, i."offset"
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[]) AS k (tenant_id, account_period, record_id, operation)
  JOIN identities i ON i.tenant_id = k.tenant_id AND i.account_period = k.account_period
                   AND i.record_id = k.record_id AND i.operation = k.operation;

-- name: IdentityReserve :batchmany
-- Reserves @blocks blocks of identity ids and reads the transaction's
-- clock, so a batch can write all its rows in one round trip. The
-- identities' sequence steps by a block (db.IDBlock, migration 0003): one
-- nextval v reserves v .. v+IDBlock-1 (db.Reserved spreads them); the
-- rest of the last block is left unused (ids have gaps). The sequence is
-- named as a constant (edge/idempotency/sql/idempotency_keys.sql's IdempotencyLookupMany).
SELECT nextval('identities_id_seq'::regclass) AS v, now()::timestamptz AS now
  FROM generate_series(1, @blocks::integer);

-- name: TargetLookup :batchmany
-- Records that operations of a batch name as their targets, by (tenant,
-- period, record_id), whatever their kind: the caller tells a good target
-- from one of the wrong kind. Operations that share their target's
-- record_id (refund, reclaim, hold_release, expire, resolution) are never
-- targets.
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome, i.reason,
       i.fingerprint, i.canonical_version, i.canonical, i.response, coalesce(i.settlement_id, ''),
       i.subject, i.currency, coalesce(i.account_id, 0), coalesce(i.root_id, 0),
       i.topic, i.partition, i."offset"
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[]) AS k (tenant_id, account_period, record_id)
  JOIN identities i ON i.tenant_id = k.tenant_id AND i.account_period = k.account_period AND i.record_id = k.record_id
 WHERE i.operation NOT IN ('refund', 'reclaim', 'hold_release', 'expire', 'resolution');
