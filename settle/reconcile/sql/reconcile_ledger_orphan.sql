-- Ledger rows that no settled identity of their tenant explains: no
-- identity or account row at all (only possible with foreign keys
-- bypassed), an identity that did not settle, or another tenant's
-- identity or account ($1: tenant, '' = all).
SELECT l.id, l.tenant_id, l.identity_id, l.account_id, l.amount::text,
       CASE WHEN i.id IS NULL THEN 'ledger_row_without_identity'
            WHEN a.id IS NULL THEN 'ledger_row_without_account'
            WHEN i.outcome <> 'settled' THEN 'ledger_row_of_unsettled_identity'
            ELSE 'ledger_row_tenant_mismatch' END,
       coalesce(i.account_period, ''), coalesce(i.record_id, ''), coalesce(i.operation, '')
  FROM ledger_entries l
  LEFT JOIN identities i ON i.id = l.identity_id
  LEFT JOIN accounts a ON a.id = l.account_id
 WHERE ($1 = '' OR l.tenant_id = $1)
   AND (i.id IS NULL OR a.id IS NULL OR i.outcome <> 'settled'
        OR i.tenant_id <> l.tenant_id OR a.tenant_id <> l.tenant_id)
 ORDER BY l.id
