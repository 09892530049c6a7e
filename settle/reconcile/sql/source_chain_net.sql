-- name: SourceChainNet :many
-- The charge of chains named by their root usage, as their ledger rows
-- make it: the balance rows of the root, of its corrections, reversals and
-- resolutions, and of its refund and reclaim, counting only the members
-- whose period is in the range (from_period to to_period), negated (a
-- charge is a negative row). A root settle has not settled is not returned.
SELECT r.account_period, r.record_id, r.currency, (-coalesce(sum(e.amount), 0))::text AS net_charge
  FROM unnest(sqlc.arg(periods)::text[], sqlc.arg(record_ids)::text[]) AS k (account_period, record_id)
  JOIN identities r ON r.tenant_id = sqlc.arg(tenant_id) AND r.account_period = k.account_period
                   AND r.record_id = k.record_id AND r.operation = 'usage' AND r.outcome = 'settled'
  LEFT JOIN LATERAL (
        SELECT r.id AS id
        UNION ALL
        SELECT m.id FROM identities m
         WHERE m.tenant_id = r.tenant_id AND m.root_id = r.id AND m.id <> r.id AND m.operation IN ('correction', 'reversal', 'resolution')
           AND m.account_period >= sqlc.arg(from_period) AND m.account_period <= sqlc.arg(to_period)
        UNION ALL
        SELECT m.id FROM chains c JOIN identities m ON m.tenant_id = c.tenant_id AND m.id IN (c.refund_id, c.reclaim_id)
         WHERE c.tenant_id = r.tenant_id AND c.root_id = r.id AND m.account_period >= sqlc.arg(from_period) AND m.account_period <= sqlc.arg(to_period)) mem ON true
  LEFT JOIN ledger_entries e ON e.tenant_id = r.tenant_id AND e.identity_id = mem.id AND e.bucket = 'balance'
 GROUP BY r.id, r.account_period, r.record_id, r.currency;
