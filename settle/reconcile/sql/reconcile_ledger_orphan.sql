-- name: ReconcileLedgerOrphan :many
-- Ledger rows that no settled identity of their tenant explains: no
-- identity or account row at all (only possible with foreign keys
-- bypassed), an identity that did not settle, or another tenant's
-- identity or account (tenant_id, '' = all).
SELECT l.id, l.tenant_id, l.identity_id, l.account_id, l.amount::text AS amount,
       CASE WHEN i.id IS NULL THEN 'ledger_row_without_identity'
            WHEN a.id IS NULL THEN 'ledger_row_without_account'
            WHEN i.outcome <> 'settled' THEN 'ledger_row_of_unsettled_identity'
            ELSE 'ledger_row_tenant_mismatch' END::text AS class,
       coalesce(i.account_period, '')::text AS account_period, coalesce(i.record_id, '')::text AS record_id,
       coalesce(i.operation, '')::text AS operation
  FROM ledger_entries l
  LEFT JOIN identities i ON i.id = l.identity_id
  LEFT JOIN accounts a ON a.id = l.account_id
 WHERE (@tenant_id::text = '' OR l.tenant_id = @tenant_id)
   AND (i.id IS NULL OR a.id IS NULL OR i.outcome <> 'settled'
        OR i.tenant_id <> l.tenant_id OR a.tenant_id <> l.tenant_id)
 ORDER BY l.id;
