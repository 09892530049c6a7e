-- name: ChainLock :batchmany
-- Locks chains by root and reads their state with the root's account.
-- Driven from the array (not root_id = ANY) so the plan is one index probe
-- per root however stale the table's statistics are.
SELECT c.root_id, c.account_id, c.net_charge::text AS net_charge, c.version, coalesce(c.refund_id, 0) AS refund_id,
       coalesce(c.refunded::text, '')::text AS refunded, coalesce(c.reclaim_id, 0) AS reclaim_id, c.recovered, c.rev,
       r.subject AS root_subject, r.currency AS root_currency, coalesce(r.settlement_id, '') AS root_settlement_id,
       coalesce(f.settlement_id, '') AS refund_settlement_id
  FROM unnest(@root_id::bigint[]) AS k (root_id)
  JOIN chains c ON c.root_id = k.root_id
  JOIN identities r ON r.tenant_id = c.tenant_id AND r.id = c.root_id
  LEFT JOIN identities f ON f.tenant_id = c.tenant_id AND f.id = c.refund_id
 ORDER BY c.root_id
   FOR UPDATE OF c;
