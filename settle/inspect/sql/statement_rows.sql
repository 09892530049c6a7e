-- name: StatementRows :many
-- Every ledger row of a tenant's statement for one period, in account and
-- row order, with what puts it on its line: the rows behind the figures. A
-- capture's held row is listed under both its parts, each with its part
-- of the amount (statement_lines.sql). (The outer casts tell sqlc a column
-- is never NULL.)
SELECT e.account_id, e.id, i.operation, e.bucket, s.part::text AS part,
       (CASE WHEN i.operation IN ('usage', 'correction') AND e.bucket = 'balance'
             THEN coalesce(convert_from(i.canonical, 'UTF8')::json ->> 'meter', '') ELSE '' END)::text AS meter,
       coalesce((i.response ->> 'late')::boolean, false)::boolean AS late,
       s.amount::text AS amount, i.record_id, coalesce(i.settlement_id, '') AS settlement_id,
       coalesce((i.response ->> 'sequence')::bigint, 0)::bigint AS sequence, e.created_at
  FROM accounts a
  JOIN ledger_entries e ON e.tenant_id = a.tenant_id AND e.account_id = a.id
  JOIN identities i ON i.tenant_id = e.tenant_id AND i.id = e.identity_id
 CROSS JOIN LATERAL (
        SELECT CASE WHEN i.operation = 'usage' AND e.bucket = 'held'
                    THEN greatest(e.amount, (SELECT b.amount FROM ledger_entries b
                                              WHERE b.tenant_id = e.tenant_id AND b.identity_id = e.identity_id AND b.bucket = 'balance'))
               END AS captured) c
 CROSS JOIN LATERAL (VALUES ('', coalesce(c.captured, e.amount)), ('released', e.amount - c.captured)) AS s (part, amount)
 WHERE a.tenant_id = sqlc.arg(tenant_id) AND (sqlc.arg(subject)::text = '' OR a.subject = sqlc.arg(subject))
   AND i.account_period = sqlc.arg(period)
   AND (s.part = '' OR s.amount <> 0)
 ORDER BY e.account_id, e.id, s.part
 LIMIT sqlc.arg(rows_max);
