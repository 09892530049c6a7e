-- name: LedgerEntriesOfAccount :many
-- The newest ledger rows of an account, with the identity behind each.
SELECT e.id, e.bucket, e.amount::text AS amount, e.created_at, i.account_period, i.record_id, i.operation,
       coalesce(i.settlement_id, '') AS settlement_id, coalesce(r.record_id, '') AS root_record_id
  FROM ledger_entries e
  JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
  LEFT JOIN identities r ON r.tenant_id = i.tenant_id AND r.id = i.root_id
 WHERE e.tenant_id = sqlc.arg(tenant_id) AND e.account_id = sqlc.arg(account_id)
 ORDER BY e.id DESC
 LIMIT sqlc.arg(rows_max);
