-- name: AccountSearch :many
-- Accounts whose subject is subject, for the analysts' search; tenant = ''
-- means any tenant (then a scan of accounts, one row per subject and
-- currency).
SELECT a.tenant_id, a.subject, a.currency, a.balance::text AS balance
  FROM account_states a
 WHERE (sqlc.arg(tenant)::text = '' OR a.tenant_id = sqlc.arg(tenant))
   AND a.subject = sqlc.arg(subject)
 ORDER BY a.tenant_id, a.currency
 LIMIT sqlc.arg(hits_max);
