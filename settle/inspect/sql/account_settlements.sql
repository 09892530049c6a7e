-- name: AccountSettlements :many
-- The newest settlements that wrote rows to one account (tenant, subject,
-- currency), with the per-account sequence and balance after each, as their
-- stored response says. A settlement writes one or two rows per account
-- (balance, held), so the newest 2 x settlements_max rows hold the newest
-- settlements_max settlements; read through the ledger's primary key (tenant_id, account_id, id), not all
-- the rows. (The outer casts tell sqlc a column is never NULL.)
SELECT coalesce((i.response::jsonb ->> 'sequence')::bigint, 0)::bigint AS sequence, coalesce(i.settlement_id, '') AS settlement_id,
       i.account_period, i.record_id, i.operation, coalesce(i.response::jsonb ->> 'balance_after', '')::text AS balance_after,
       coalesce(i.response::jsonb ->> 'held_after', '')::text AS held_after, i.committed_at
  FROM accounts a
  JOIN LATERAL (SELECT DISTINCT r.identity_id
                  FROM (SELECT e.identity_id FROM ledger_entries e
                         WHERE e.tenant_id = a.tenant_id AND e.account_id = a.id ORDER BY e.id DESC LIMIT 2 * sqlc.arg(settlements_max)::integer) r) s ON true
  JOIN identities i ON i.tenant_id = a.tenant_id AND i.id = s.identity_id
 WHERE a.tenant_id = sqlc.arg(tenant_id) AND a.subject = sqlc.arg(subject) AND a.currency = sqlc.arg(currency)
 ORDER BY 1 DESC, i.id DESC
 LIMIT sqlc.arg(settlements_max);
