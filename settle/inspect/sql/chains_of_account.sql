-- name: ChainsOfAccount :many
-- The net view: every chain of an account, its root, net charge, version
-- and refund state.
SELECT r.account_period, r.record_id, c.net_charge::text AS net_charge, c.version,
       coalesce(c.refunded::text, '')::text AS refunded,
       (c.reclaim_id IS NOT NULL AND NOT c.recovered)::boolean AS reclaimed, c.recovered,
       (SELECT count(*) FROM identities m WHERE m.tenant_id = c.tenant_id AND m.root_id = c.root_id AND m.operation IN ('correction', 'reversal', 'resolution')) AS adjustments
  FROM chains c JOIN identities r ON r.tenant_id = c.tenant_id AND r.id = c.root_id
 WHERE c.account_id = sqlc.arg(account_id)
 ORDER BY c.root_id DESC
 LIMIT sqlc.arg(chains_max);
