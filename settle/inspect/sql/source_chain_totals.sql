-- name: SourceChainTotals :many
-- Settle's side of a source export's totals: the charge of every chain
-- whose root usage is in the tenant's period range, as source_chain_net.sql
-- computes one, summed per root period and currency.
SELECT r.account_period, r.currency, (-coalesce(sum(e.amount), 0))::text AS charge, count(DISTINCT r.id) AS chains
  FROM identities r
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
 WHERE r.tenant_id = sqlc.arg(tenant_id) AND r.account_period >= sqlc.arg(from_period) AND r.account_period <= sqlc.arg(to_period)
   AND r.operation = 'usage' AND r.outcome = 'settled'
 GROUP BY r.account_period, r.currency;
