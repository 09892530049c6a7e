-- name: LedgerEntryInsert :exec
-- The ledger entries of a small batch, in its last pipeline (see
-- identity_insert.sql); ledger_entry_copy.sql writes a large batch's.
INSERT INTO ledger_entries (id, identity_id, account_id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after)
SELECT k.id, k.identity_id, k.account_id, k.tenant_id, k.bucket, k.amount, k.chain_hash, k.seq, k.balance_after, k.held_after
  FROM unnest(@id::bigint[], @identity_id::bigint[], @account_id::bigint[], @tenant_id::text[], @bucket::text[],
              (@amount::text[])::numeric[], @chain_hash::bytea[], @seq::bigint[],
              (@balance_after::text[])::numeric[], (@held_after::text[])::numeric[])
       AS k (id, identity_id, account_id, tenant_id, bucket, amount, chain_hash, seq, balance_after, held_after);
