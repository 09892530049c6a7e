-- name: ReconcileReferences :many
-- References the per-record tables hold without foreign keys (migration
-- 0003): a delivery naming no identity, an identity naming no account, or
-- a root or target identity that does not exist (tenant_id, '' = all).
SELECT 'delivery_without_identity'::text AS class, d.tenant_id::text AS tenant_id, d.identity_id::bigint AS identity_id,
       ''::text AS account_period, ''::text AS record_id, ''::text AS operation,
       d.topic::text AS topic, d.partition::int AS partition, d."offset"::bigint AS "offset"
  FROM deliveries d
 WHERE d.identity_id IS NOT NULL
   AND (@tenant_id::text = '' OR d.tenant_id = @tenant_id)
   AND NOT EXISTS (SELECT 1 FROM identities i WHERE i.id = d.identity_id)
UNION ALL
SELECT CASE WHEN i.account_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = i.account_id)
            THEN 'identity_without_account' ELSE 'identity_reference_missing' END,
       i.tenant_id, i.id, i.account_period, i.record_id, i.operation, i.topic, i.partition, i."offset"
  FROM identities i
 WHERE (@tenant_id::text = '' OR i.tenant_id = @tenant_id)
   AND ((i.account_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = i.account_id))
        OR (i.root_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities r WHERE r.id = i.root_id))
        OR (i.target_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities t WHERE t.id = i.target_id)));
