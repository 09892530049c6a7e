-- name: LedgerEntryCopy :copyfrom
-- The ledger entries of a batch, written with COPY (see identity_copy.sql);
-- each with its id (the account's previous row's + 1: the primary key
-- fences the account's writers, migration 0017) and the account's state
-- after it (seq, balance_after, held_after).
INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);
