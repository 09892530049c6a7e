-- name: LedgerEntryCopy :copyfrom
-- The ledger entries of a batch, written with COPY (see identity_copy.sql).
INSERT INTO ledger_entries (identity_id, account_id, tenant_id, bucket, amount, chain_hash)
VALUES ($1, $2, $3, $4, $5, $6);
