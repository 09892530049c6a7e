-- name: LedgerEntryInsert :exec
-- The ledger entries of a small batch, in its last pipeline (see
-- identity_insert.sql); ledger_entry_copy.sql writes a large batch's.
INSERT INTO ledger_entries (identity_id, account_id, tenant_id, bucket, amount, chain_hash)
SELECT k.identity_id, k.account_id, k.tenant_id, k.bucket, k.amount, k.chain_hash
  FROM unnest(@identity_id::bigint[], @account_id::bigint[], @tenant_id::text[], @bucket::text[],
              (@amount::text[])::numeric[], @chain_hash::bytea[])
       AS k (identity_id, account_id, tenant_id, bucket, amount, chain_hash);
