-- Identities (tenant, period, record_id, operation) stored more than once:
-- one scope key claimed twice, so one logical record could take effect
-- twice. The unique key forbids it; only a bypass could cause it ($1:
-- tenant, '' = all).
SELECT i.tenant_id, i.account_period, i.record_id, i.operation, count(*), min(i.id), max(i.id)
  FROM identities i
 WHERE ($1 = '' OR i.tenant_id = $1)
 GROUP BY i.tenant_id, i.account_period, i.record_id, i.operation
HAVING count(*) > 1
 ORDER BY min(i.id)
 LIMIT 10000
