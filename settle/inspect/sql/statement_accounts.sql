-- name: StatementAccounts :many
-- The accounts of a tenant's statement for one period: each with its
-- balance and held (account_states), and its ledger rows summed by bucket for the
-- periods before it (the opening) and after it (what the statement does
-- not cover), and how many rows the period has. A period is the record's
-- account_period, the source's assertion: a late record of an earlier
-- period counts in that period, wherever it falls in the sequence. An
-- empty subject means every account of the tenant.
SELECT a.id, a.subject, a.currency, a.balance::text AS balance, a.held::text AS held,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'balance' AND i.account_period < sqlc.arg(period)), 0)::text AS opening_balance,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'held' AND i.account_period < sqlc.arg(period)), 0)::text AS opening_held,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'balance' AND i.account_period > sqlc.arg(period)), 0)::text AS later_balance,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'held' AND i.account_period > sqlc.arg(period)), 0)::text AS later_held,
       count(e.id) FILTER (WHERE i.account_period = sqlc.arg(period)) AS period_rows,
       count(e.id) FILTER (WHERE i.id IS NULL) AS orphan_rows
  FROM account_states a
  LEFT JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  LEFT JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE a.tenant_id = sqlc.arg(tenant_id) AND (sqlc.arg(subject)::text = '' OR a.subject = sqlc.arg(subject))
 GROUP BY a.tenant_id, a.id, a.subject, a.currency, a.balance, a.held
 ORDER BY a.subject, a.currency;
