-- name: ReconcileAccounts :many
-- Every account's cached balance and held amount (tenant_id, '' = all),
-- for the comparison with a model of what they must be.
SELECT a.tenant_id, a.subject, a.currency, a.balance::text AS balance, a.held::text AS held
  FROM accounts a
 WHERE (@tenant_id::text = '' OR a.tenant_id = @tenant_id);
