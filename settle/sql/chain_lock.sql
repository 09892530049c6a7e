-- name: ChainLock :many
-- Locks chains by root and reads their state with the root's account.
-- Driven from the array (not root_id = ANY) so the plan is one index probe
-- per root however stale the table's statistics are.
SELECT c.root_id, c.account_id, c.net_charge::text, c.version, coalesce(c.refund_id, 0),
       coalesce(c.refunded::text, ''), coalesce(c.reclaim_id, 0), c.recovered, c.rev,
       r.subject, r.currency, coalesce(r.settlement_id, ''), coalesce(f.settlement_id, '')
  FROM unnest($1::bigint[]) AS k (root_id)
  JOIN chains c ON c.root_id = k.root_id
  JOIN identities r ON r.tenant_id = c.tenant_id AND r.id = c.root_id
  LEFT JOIN identities f ON f.tenant_id = c.tenant_id AND f.id = c.refund_id
 ORDER BY c.root_id
   FOR UPDATE OF c;
