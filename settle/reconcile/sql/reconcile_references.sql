-- References the per-record tables hold without foreign keys (migration
-- 0003): a delivery naming no identity, an identity naming no account, or
-- a root or target identity that does not exist ($1: tenant, '' = all).
SELECT 'delivery_without_identity', d.tenant_id, d.identity_id, '', '', '', d.topic, d.partition, d."offset"
  FROM deliveries d
 WHERE d.identity_id IS NOT NULL
   AND ($1 = '' OR d.tenant_id = $1)
   AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.id = d.identity_id)
UNION ALL
SELECT CASE WHEN i.account_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = i.account_id)
            THEN 'identity_without_account' ELSE 'identity_reference_missing' END,
       i.tenant_id, i.id, i.account_period, i.record_id, i.operation, i.topic, i.partition, i."offset"
  FROM identities i
 WHERE ($1 = '' OR i.tenant_id = $1)
   AND ((i.account_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = i.account_id))
        OR (i.root_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities r WHERE r.id = i.root_id))
        OR (i.target_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities t WHERE t.id = i.target_id)))
