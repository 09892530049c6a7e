-- name: ChainsOfAccount :many
-- The net view: every chain of an account, its root, net charge, version
-- and refund state.
SELECT r.account_period, r.record_id, c.net_charge::text, c.version, coalesce(c.refunded::text, ''),
       c.reclaim_id IS NOT NULL AND NOT c.recovered, c.recovered,
       (SELECT count(*) FROM identities m WHERE m.tenant_id = c.tenant_id AND m.root_id = c.root_id AND m.operation IN ('correction', 'reversal', 'resolution'))
  FROM chains c JOIN identities r ON r.tenant_id = c.tenant_id AND r.id = c.root_id
 WHERE c.account_id = $1
 ORDER BY c.root_id DESC
 LIMIT $2;
