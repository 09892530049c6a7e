-- name: ReconcileAccounts :many
-- Every account's balance and held amount (its newest ledger row's) (tenant_id, '' = all),
-- for the comparison with a model of what they must be.
SELECT a.tenant_id, a.subject, a.currency, a.balance::text AS balance, a.held::text AS held
  FROM account_states a
 WHERE (@tenant_id::text = '' OR a.tenant_id = @tenant_id);
