-- name: AccountBalances :many
-- Accounts of a tenant (one subject, or all), with active holds.
SELECT a.id, a.subject, a.currency, a.balance::text, a.held::text, (a.balance - a.held)::text, a.seq
  FROM accounts a
 WHERE a.tenant_id = $1 AND ($2 = '' OR a.subject = $2)
 ORDER BY a.subject, a.currency;
