-- name: ChainLock :batchmany
-- Locks chains by root and reads their state with the root's account.
-- Driven from the array (not root_id = ANY) so the plan is one index probe
-- per root however stale the table's statistics are. The root and refund
-- identities are each probed in a lateral subquery of their own (LIMIT 1
-- keeps it from being flattened): joined freely, with no foreign key to
-- tell the planner that a chain names one identity, it took each chain to
-- match several, and once chains had grown its plan read the whole of
-- chains_root in root order, to spare the sort, with the array as the inner
-- side (auto_explain at 300,000 records end to end: 1.2 s a batch).
SELECT c.root_id, c.account_id, c.net_charge::text AS net_charge, c.version, coalesce(c.refund_id, 0) AS refund_id,
       coalesce(c.refunded::text, '')::text AS refunded, coalesce(c.reclaim_id, 0) AS reclaim_id, c.recovered, c.rev,
       r.subject AS root_subject, r.currency AS root_currency, coalesce(r.settlement_id, '') AS root_settlement_id,
       coalesce(f.settlement_id, '') AS refund_settlement_id
  FROM unnest(@root_id::bigint[]) AS k (root_id)
  JOIN chains c ON c.root_id = k.root_id
 CROSS JOIN LATERAL (SELECT r.subject, r.currency, r.settlement_id
                       FROM identities r
                      WHERE r.id = c.root_id AND r.tenant_id = c.tenant_id LIMIT 1) r
  LEFT JOIN LATERAL (SELECT f.settlement_id
                       FROM identities f
                      WHERE f.id = c.refund_id AND f.tenant_id = c.tenant_id LIMIT 1) f ON true
 ORDER BY c.root_id
   FOR UPDATE OF c;
