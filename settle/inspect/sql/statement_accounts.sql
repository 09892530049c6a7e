-- name: StatementAccounts :many
-- The accounts of a tenant's statement for one period ($2): each with its
-- cached balance and held, and its ledger rows summed by bucket for the
-- periods before $2 (the opening) and after it (what the statement does
-- not cover), and how many rows $2 has. A period is the record's
-- account_period, the source's assertion: a late record of an earlier
-- period counts in that period, wherever it falls in the sequence.
SELECT a.id, a.subject, a.currency, a.balance::text, a.held::text,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'balance' AND i.account_period < $2), 0)::text,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'held' AND i.account_period < $2), 0)::text,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'balance' AND i.account_period > $2), 0)::text,
       coalesce(sum(e.amount) FILTER (WHERE e.bucket = 'held' AND i.account_period > $2), 0)::text,
       count(e.id) FILTER (WHERE i.account_period = $2),
       count(e.id) FILTER (WHERE i.id IS NULL)
  FROM accounts a
  LEFT JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  LEFT JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE a.tenant_id = $1 AND ($3 = '' OR a.subject = $3)
 GROUP BY a.tenant_id, a.id
 ORDER BY a.subject, a.currency;
