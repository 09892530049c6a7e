-- Every account's cached balance and held amount ($1: tenant, '' = all),
-- for the comparison with a model of what they must be.
SELECT a.tenant_id, a.subject, a.currency, a.balance::text, a.held::text
  FROM accounts a
 WHERE ($1 = '' OR a.tenant_id = $1)
