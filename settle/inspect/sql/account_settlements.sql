-- name: AccountSettlements :many
-- The newest settlements that wrote rows to one account ($1 tenant, $2
-- subject, $3 currency), with the per-account sequence and balance after
-- each, as their stored response says. A settlement writes one or two rows
-- per account (balance, held), so the newest 2 x $4 rows hold the newest
-- $4 settlements; read through ledger_entries_account, not all the rows.
SELECT coalesce((i.response::jsonb ->> 'sequence')::bigint, 0), coalesce(i.settlement_id, ''),
       i.account_period, i.record_id, i.operation, coalesce(i.response::jsonb ->> 'balance_after', ''),
       coalesce(i.response::jsonb ->> 'held_after', ''), i.committed_at
  FROM accounts a
  JOIN LATERAL (SELECT DISTINCT r.identity_id
                  FROM (SELECT e.identity_id FROM ledger_entries e
                         WHERE e.tenant_id = a.tenant_id AND e.account_id = a.id ORDER BY e.id DESC LIMIT 2 * $4) r) s ON true
  JOIN identities i ON i.tenant_id = a.tenant_id AND i.id = s.identity_id
 WHERE a.tenant_id = $1 AND a.subject = $2 AND a.currency = $3
 ORDER BY 1 DESC, i.id DESC
 LIMIT $4;
