-- name: SourceChainNet :many
-- The charge of chains named by their root usage, as their ledger rows
-- make it: the balance rows of the root, of its corrections, reversals and
-- resolutions, and of its refund and reclaim, counting only the members
-- whose period is in the range (from_period to to_period), negated (a
-- charge is a negative row). A root settle has not settled is not returned.
-- Each key is looked up on its own, and each chain's members and rows
-- through their indexes, so a chunk reads its chains' rows whatever the
-- planner's statistics say: a LATERAL with LIMIT is not flattened into a
-- join and a scalar subquery runs per row, each a scan of one table by an
-- indexed key (identities_scope_key, chains_pkey, identities_root, the
-- identities_pkey of the refund and the reclaim, ledger_entries_identity).
-- A scan names nothing else an index could serve: ledger rows are found by
-- their identity's id alone and members by their root's (ids are unique
-- across tenants), the members' tenant and period tested in a CASE; with
-- the tenant or the period as conditions, a planner without statistics
-- ANDs in the tenant's every row from another index. Written as one join,
-- a chunk of 5,000 on a tenant just loaded and not yet analysed read every
-- ledger row of the tenant once per root.
SELECT r.account_period, r.record_id, r.currency, (-(
         (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e
           WHERE e.identity_id = r.id AND e.bucket = 'balance')
       + (SELECT coalesce(sum(CASE WHEN m.tenant_id = sqlc.arg(tenant_id) AND m.id <> r.id
                                    AND m.account_period >= sqlc.arg(from_period) AND m.account_period <= sqlc.arg(to_period)
                                   THEN (SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e
                                          WHERE e.identity_id = m.id AND e.bucket = 'balance') END), 0)
            FROM identities m
           WHERE m.root_id = r.id AND m.operation IN ('correction', 'reversal', 'resolution'))
       + (SELECT coalesce(sum((SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e
                                WHERE e.identity_id = m.id AND e.bucket = 'balance')), 0)
            FROM identities m
           WHERE m.id = c.refund_id AND m.tenant_id = sqlc.arg(tenant_id)
             AND m.account_period >= sqlc.arg(from_period) AND m.account_period <= sqlc.arg(to_period))
       + (SELECT coalesce(sum((SELECT coalesce(sum(e.amount), 0) FROM ledger_entries e
                                WHERE e.identity_id = m.id AND e.bucket = 'balance')), 0)
            FROM identities m
           WHERE m.id = c.reclaim_id AND m.tenant_id = sqlc.arg(tenant_id)
             AND m.account_period >= sqlc.arg(from_period) AND m.account_period <= sqlc.arg(to_period))
       ))::text AS net_charge
  FROM unnest(sqlc.arg(periods)::text[], sqlc.arg(record_ids)::text[]) AS k (account_period, record_id)
 CROSS JOIN LATERAL (
        SELECT i.id, i.account_period, i.record_id, i.currency FROM identities i
         WHERE i.tenant_id = sqlc.arg(tenant_id) AND i.account_period = k.account_period AND i.record_id = k.record_id
           AND i.operation = 'usage' AND i.outcome = 'settled'
         LIMIT 1) r
  LEFT JOIN LATERAL (
        SELECT ch.refund_id, ch.reclaim_id FROM chains ch WHERE ch.tenant_id = sqlc.arg(tenant_id) AND ch.root_id = r.id LIMIT 1) c ON true;
