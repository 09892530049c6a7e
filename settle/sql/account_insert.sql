-- name: AccountInsert :batchexec
-- Creates the accounts a batch touches that do not exist yet. Sorted, so
-- concurrent batches insert in one order and cannot deadlock on the keys.
INSERT INTO accounts (tenant_id, subject, currency)
SELECT k.tenant_id, k.subject, k.currency
  FROM unnest(@tenant_id::text[], @subject::text[], @currency::text[]) AS k (tenant_id, subject, currency)
 ORDER BY 1, 2, 3
    ON CONFLICT ON CONSTRAINT accounts_key DO NOTHING;
