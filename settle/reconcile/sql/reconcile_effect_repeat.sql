-- Identities whose ledger rows were written by more than one transaction:
-- an effect applied more than once. Rows of one transaction share
-- created_at (now() is the transaction's start) ($1: tenant, '' = all).
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation,
       coalesce(i.settlement_id, ''), count(DISTINCT l.created_at)
  FROM ledger_entries l
  JOIN identities i ON i.tenant_id = l.tenant_id AND i.id = l.identity_id
 WHERE ($1 = '' OR i.tenant_id = $1)
 GROUP BY i.tenant_id, i.id
HAVING count(DISTINCT l.created_at) > 1
 ORDER BY i.id
