-- name: LedgerEntryCopy :copyfrom
-- The ledger entries of a batch, written with COPY (see identity_copy.sql);
-- each with its id (the account's previous row's + 1: the primary key
-- fences the account's writers, migration 0017) and the account's state
-- after it (seq, balance_after, held_after).
INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: LedgerEntryInsert :exec
-- The ledger entries of a small batch, in its last pipeline (see
-- identity_insert.sql); ledger_entry_copy.sql writes a large batch's.
INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after)
SELECT k.id, k.identity_id, k.account_id, k.tenant_id, k.bucket, k.amount, k.chain_hash, k.seq, k.balance_after, k.held_after
  FROM unnest(@id::bigint[], @identity_id::bigint[], @account_id::bigint[], @tenant_id::text[], @bucket::text[],
              (@amount::text[])::numeric[], @chain_hash::bytea[], @seq::bigint[],
              (@balance_after::text[])::numeric[], (@held_after::text[])::numeric[])
       AS k (id, identity_id, account_id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after);
