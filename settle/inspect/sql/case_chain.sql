-- name: CaseChain :one
-- The chain a case is about, as it is now: the chain of the record it
-- names (tenant, period, record_id), from its chains row, or from its root
-- usage while the chain has none. (The outer casts tell sqlc a column is
-- never NULL: a NULL there fails the read, as it should.)
WITH r AS (
    SELECT i.root_id
      FROM identities i
     WHERE i.tenant_id = $1 AND i.account_period = $2 AND i.record_id = $3
       AND i.operation IN ('usage', 'correction', 'reversal')
       AND i.outcome <> 'quarantined' AND i.root_id IS NOT NULL
     LIMIT 1
)
SELECT coalesce(c.net_charge::text, convert_from(root.canonical, 'UTF8')::json ->> 'amount')::text AS net_charge,
       coalesce(c.version, (convert_from(root.canonical, 'UTF8')::json ->> 'finalization_version')::bigint) AS version,
       (c.refund_id IS NOT NULL AND c.reclaim_id IS NULL)::boolean AS refunded,
       coalesce(root.settlement_id, '') AS root_settlement_id, root.currency
  FROM r
  JOIN identities root ON root.tenant_id = $1 AND root.id = r.root_id
  LEFT JOIN chains c ON c.tenant_id = $1 AND c.root_id = r.root_id;
