-- name: ChainInsert :exec
INSERT INTO chains (root_id, tenant_id, account_id, net_charge, version, refund_id, refunded, reclaim_id, recovered)
SELECT k.root_id, k.tenant_id, k.account_id, k.net_charge, k.version, nullif(k.refund_id, 0), nullif(k.refunded, '')::numeric,
       nullif(k.reclaim_id, 0), k.recovered
  FROM unnest(@root_id::bigint[], @tenant_id::text[], @account_id::bigint[], (@net_charge::text[])::numeric[], @version::bigint[], @refund_id::bigint[], @refunded::text[],
              @reclaim_id::bigint[], @recovered::boolean[])
       AS k (root_id, tenant_id, account_id, net_charge, version, refund_id, refunded, reclaim_id, recovered);

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

-- name: ChainRoot :batchmany
-- The roots of chains that may have no chains row yet: a chain gets its row
-- when it is first adjusted or refunded; until then it is its root usage.
SELECT r.id, r.canonical, r.subject, r.currency, coalesce(r.settlement_id, ''), coalesce(r.account_id, 0)
  FROM identities r
 WHERE r.id = ANY (@root_ids::bigint[]);

-- name: ChainUpdate :exec
-- Writes the chains a batch changed, each guarded on the revision it read:
-- the conditional write that makes refund and reclaim guards single. The
-- statement fails unless it updated every chain it names (settle_guard).
WITH u AS (
    UPDATE chains c
       SET net_charge = k.net_charge, version = k.version, refund_id = nullif(k.refund_id, 0),
           refunded = nullif(k.refunded, '')::numeric, reclaim_id = nullif(k.reclaim_id, 0), recovered = k.recovered,
           rev = c.rev + 1, updated_at = now()
      FROM unnest(@root_id::bigint[], (@net_charge::text[])::numeric[], @version::bigint[], @refund_id::bigint[], @refunded::text[], @reclaim_id::bigint[], @recovered::boolean[], @rev::integer[])
           AS k (root_id, net_charge, version, refund_id, refunded, reclaim_id, recovered, rev)
     WHERE c.root_id = k.root_id AND c.rev = k.rev
 RETURNING 1
)
SELECT settle_guard('chain_update', (SELECT count(*) FROM u), cardinality(@root_id::bigint[]));
