-- name: StatementSequences :many
-- Per account, the settlements of one period that wrote its rows: how many,
-- and the range of the account's sequence they hold.
SELECT e.account_id, count(DISTINCT i.id),
       coalesce(min((i.response ->> 'sequence')::bigint), 0), coalesce(max((i.response ->> 'sequence')::bigint), 0)
  FROM accounts a
  JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE a.tenant_id = $1 AND ($3 = '' OR a.subject = $3) AND i.account_period = $2
 GROUP BY 1;
