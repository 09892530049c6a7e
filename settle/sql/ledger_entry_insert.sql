INSERT INTO ledger_entries (identity_id, account_id, tenant_id, bucket, amount, chain_hash)
SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[]::numeric[], $6::bytea[])
