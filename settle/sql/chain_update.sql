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
