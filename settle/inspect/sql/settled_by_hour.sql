-- name: SettledByHour :many
-- Settled records per hour and currency since since, with what they
-- charged (balance rows below zero, as a positive sum) and credited
-- (balance rows above zero): the overview's settled volume. An empty tenant
-- means every tenant but hidden (the canary's); a record counts in each
-- currency it moved. The window is bounded: identities_committed (a BRIN
-- index) finds its identities, ledger_entries_identity each one's rows.
SELECT date_trunc('hour', i.committed_at)::timestamptz AS hour, a.currency,
       count(DISTINCT i.id)::bigint AS settled,
       coalesce(sum(-l.amount) FILTER (WHERE l.bucket = 'balance' AND l.amount < 0), 0)::text AS charged,
       coalesce(sum(l.amount) FILTER (WHERE l.bucket = 'balance' AND l.amount > 0), 0)::text AS credited
  FROM identities i
  JOIN ledger_entries l ON l.identity_id = i.id AND l.tenant_id = i.tenant_id
  JOIN accounts a ON a.tenant_id = l.tenant_id AND a.id = l.account_id
 WHERE i.committed_at >= sqlc.arg(since)::timestamptz AND i.outcome = 'settled'
   AND (sqlc.arg(tenant)::text = '' AND i.tenant_id <> sqlc.arg(hidden)::text OR i.tenant_id = sqlc.arg(tenant))
 GROUP BY 1, 2
 ORDER BY 1, 2;
