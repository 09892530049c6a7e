-- name: AccountBalances :many
-- Accounts of a tenant (one subject, or all when subject is ''), with
-- active holds.
SELECT a.id, a.subject, a.currency, a.balance::text AS balance, a.held::text AS held,
       (a.balance - a.held)::text AS available, a.seq
  FROM account_states a
 WHERE a.tenant_id = sqlc.arg(tenant_id) AND (sqlc.arg(subject)::text = '' OR a.subject = sqlc.arg(subject))
 ORDER BY a.subject, a.currency;
