-- name: ReconcileHashChain :many
-- Every account with its ledger rows in chain order (by id), what each
-- row's hash covers, and the account's head; an account without rows
-- comes once with a NULL row (id 0, chain_hash NULL).
SELECT coalesce(e.id, 0)::bigint AS id, a.id AS account_id, a.tenant_id, a.subject, a.currency,
       coalesce(i.settlement_id, '')::text AS settlement_id,
       coalesce(e.bucket, '')::text AS bucket, coalesce(e.amount::text, '')::text AS amount, e.chain_hash, a.chain_head
  FROM account_states a
  LEFT JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  LEFT JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE (@tenant_id::text = '' OR a.tenant_id = @tenant_id)
 ORDER BY a.id, e.id;
