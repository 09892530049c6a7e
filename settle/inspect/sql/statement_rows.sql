-- name: StatementRows :many
-- Every ledger row of a tenant's statement for one period, in account and
-- row order, with what puts it on its line: the rows behind the figures.
SELECT e.account_id, e.id, i.operation, e.bucket,
       CASE WHEN i.operation IN ('usage', 'correction') AND e.bucket = 'balance'
            THEN coalesce(convert_from(i.canonical, 'UTF8')::json ->> 'meter', '') ELSE '' END,
       coalesce((i.response ->> 'late')::boolean, false),
       e.amount::text, i.record_id, coalesce(i.settlement_id, ''),
       coalesce((i.response ->> 'sequence')::bigint, 0), e.created_at
  FROM accounts a
  JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE a.tenant_id = $1 AND ($3 = '' OR a.subject = $3) AND i.account_period = $2
 ORDER BY e.account_id, e.id
 LIMIT $4;
