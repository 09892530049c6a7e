-- Every account with its ledger rows in chain order (by id), what each
-- row's hash covers, and the account's head; an account without rows
-- comes once with a NULL row.
SELECT coalesce(e.id, 0), a.id, a.tenant_id, a.subject, a.currency, coalesce(i.settlement_id, ''),
       coalesce(e.bucket, ''), coalesce(e.amount::text, ''), e.chain_hash, a.chain_head
  FROM accounts a
  LEFT JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  LEFT JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE ($1 = '' OR a.tenant_id = $1)
 ORDER BY a.id, e.id
