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
