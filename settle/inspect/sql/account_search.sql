-- name: AccountSearch :many
-- Accounts whose subject is $2, for the analysts' search; $1 = '' means any
-- tenant (then a scan of accounts, one row per subject and currency).
SELECT a.tenant_id, a.subject, a.currency, a.balance::text
  FROM accounts a
 WHERE ($1::text = '' OR a.tenant_id = $1)
   AND a.subject = $2
 ORDER BY a.tenant_id, a.currency
 LIMIT $3;
