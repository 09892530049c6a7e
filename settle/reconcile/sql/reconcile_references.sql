-- name: ReconcileReferences :many
-- References the per-record tables hold without foreign keys (migrations
-- 0003 and 0013): a delivery naming no identity, an identity naming no
-- account, or a root or target identity that does not exist; a chain or a
-- hold naming no account, or an identity (a chain's root, refund or
-- reclaim; a hold's own or the one that closed it) that does not exist
-- (tenant_id, '' = all). A chain or a hold has no coordinates of its own:
-- its identity_id is its root's or its own.
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
        OR (i.target_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities t WHERE t.id = i.target_id)))
UNION ALL
SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = c.account_id AND a.tenant_id = c.tenant_id)
            THEN 'chain_without_account' ELSE 'chain_reference_missing' END,
       c.tenant_id, c.root_id, '', '', '', '', 0, 0
  FROM chains c
 WHERE (@tenant_id::text = '' OR c.tenant_id = @tenant_id)
   AND (NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = c.account_id AND a.tenant_id = c.tenant_id)
        OR NOT EXISTS (SELECT 1 FROM identities r WHERE r.id = c.root_id AND r.tenant_id = c.tenant_id)
        OR (c.refund_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities x WHERE x.id = c.refund_id AND x.tenant_id = c.tenant_id))
        OR (c.reclaim_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities x WHERE x.id = c.reclaim_id AND x.tenant_id = c.tenant_id)))
UNION ALL
SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = h.account_id AND a.tenant_id = h.tenant_id)
            THEN 'hold_without_account' ELSE 'hold_reference_missing' END,
       h.tenant_id, h.identity_id, '', '', '', '', 0, 0
  FROM holds h
 WHERE (@tenant_id::text = '' OR h.tenant_id = @tenant_id)
   AND (NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = h.account_id AND a.tenant_id = h.tenant_id)
        OR NOT EXISTS (SELECT 1 FROM identities x WHERE x.id = h.identity_id AND x.tenant_id = h.tenant_id)
        OR (h.closed_by IS NOT NULL AND NOT EXISTS (SELECT 1 FROM identities x WHERE x.id = h.closed_by AND x.tenant_id = h.tenant_id)));
