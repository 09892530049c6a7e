-- name: PeriodLookup :batchmany
-- Closed periods among a batch's (tenant, period) pairs.
SELECT p.tenant_id, p.account_period
  FROM unnest(@tenant_id::text[], @account_period::text[]) AS k (tenant_id, account_period)
  JOIN periods p ON p.tenant_id = k.tenant_id AND p.account_period = k.account_period;
