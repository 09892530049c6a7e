-- name: StatementLines :many
-- The lines of a tenant's statement for one period: its ledger rows summed
-- by account, operation, bucket, meter (usage and corrections) and the late
-- flag of the settlement (CONTRACT.md section 5), with the row and
-- settlement counts, the row id range and the per-account sequence range
-- behind each sum.
SELECT e.account_id, i.operation, e.bucket,
       CASE WHEN i.operation IN ('usage', 'correction') AND e.bucket = 'balance'
            THEN coalesce(convert_from(i.canonical, 'UTF8')::json ->> 'meter', '') ELSE '' END AS meter,
       coalesce((i.response ->> 'late')::boolean, false) AS late,
       sum(e.amount)::text, count(*), count(DISTINCT i.id), min(e.id), max(e.id),
       coalesce(min((i.response ->> 'sequence')::bigint), 0), coalesce(max((i.response ->> 'sequence')::bigint), 0)
  FROM accounts a
  JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 WHERE a.tenant_id = $1 AND ($3 = '' OR a.subject = $3) AND i.account_period = $2
 GROUP BY 1, 2, 3, 4, 5
 ORDER BY 1, 5, 2, 3, 4;
