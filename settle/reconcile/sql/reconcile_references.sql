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
SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = o.account_id AND a.tenant_id = o.tenant_id)
            THEN o.kind || '_without_account' ELSE o.kind || '_reference_missing' END,
       o.tenant_id, o.id, '', '', '', '', 0, 0
  FROM (SELECT 'chain' AS kind, c.tenant_id, c.root_id AS id, c.account_id,
               ARRAY[c.root_id, c.refund_id, c.reclaim_id] AS names
          FROM chains c
        UNION ALL
        SELECT 'hold', h.tenant_id, h.identity_id, h.account_id, ARRAY[h.identity_id, h.closed_by]
          FROM holds h) o
 WHERE (@tenant_id::text = '' OR o.tenant_id = @tenant_id)
   AND (NOT EXISTS (SELECT 1 FROM accounts a WHERE a.id = o.account_id AND a.tenant_id = o.tenant_id)
        OR EXISTS (SELECT 1 FROM unnest(o.names) AS n (id)
                    WHERE n.id IS NOT NULL
                      AND NOT EXISTS (SELECT 1 FROM identities x WHERE x.id = n.id AND x.tenant_id = o.tenant_id)));
