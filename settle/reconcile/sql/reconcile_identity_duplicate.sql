-- name: ReconcileIdentityDuplicate :many
-- Identities (tenant, period, record_id, operation) stored more than once:
-- one scope key claimed twice, so one logical record could take effect
-- twice. The unique key forbids it; only a bypass could cause it
-- (tenant_id, '' = all).
SELECT i.tenant_id, i.account_period, i.record_id, i.operation, count(*) AS copies, min(i.id) AS first_id, max(i.id) AS last_id
  FROM identities i
 WHERE (@tenant_id::text = '' OR i.tenant_id = @tenant_id)
 GROUP BY i.tenant_id, i.account_period, i.record_id, i.operation
HAVING count(*) > 1
 ORDER BY min(i.id)
 LIMIT 10000;
