-- name: StatementSequences :many
-- Per account, the settlements of one period that wrote its rows: how many,
-- and the range of the account's sequence they hold.
SELECT e.account_id, count(DISTINCT i.id) AS settlements,
       coalesce(min((i.response ->> 'sequence')::bigint), 0)::bigint AS first_sequence,
       coalesce(max((i.response ->> 'sequence')::bigint), 0)::bigint AS last_sequence
  FROM accounts a
  JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE a.tenant_id = sqlc.arg(tenant_id) AND (sqlc.arg(subject)::text = '' OR a.subject = sqlc.arg(subject))
   AND i.account_period = sqlc.arg(period)
 GROUP BY 1;
