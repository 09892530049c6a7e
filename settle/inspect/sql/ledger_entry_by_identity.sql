-- name: LedgerEntryByIdentity :many
-- The ledger rows one identity wrote (ledger_entries_identity).
SELECT e.id, e.account_id, a.subject, a.currency, e.bucket, e.amount::text AS amount, e.created_at
  FROM ledger_entries e
  JOIN accounts a ON a.tenant_id = e.tenant_id AND a.id = e.account_id
 WHERE e.identity_id = $1
 ORDER BY e.id;
