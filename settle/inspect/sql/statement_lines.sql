-- name: StatementLines :many
-- The lines of a tenant's statement for one period: its ledger rows summed
-- by account, operation, bucket, part (below), meter (usage and
-- corrections) and the late flag of the settlement (CONTRACT.md section
-- 5), with the row and settlement counts, the row id range and the
-- per-account sequence range behind each sum. A capture's held row is the
-- hold's whole remainder taken off held: its part "captured" is what the
-- usage charged of it (the remainder or the charge, whichever is smaller)
-- and its part "released" the rest, so a partial capture reads as captured
-- plus released (statement_rows.sql splits it alike). (The outer casts
-- tell sqlc a column is never NULL.)
SELECT e.account_id, i.operation, e.bucket, s.part::text AS part,
       CASE WHEN i.operation IN ('usage', 'correction') AND e.bucket = 'balance'
            THEN coalesce(convert_from(i.canonical, 'UTF8')::json ->> 'meter', '') ELSE '' END AS meter,
       coalesce((i.response ->> 'late')::boolean, false)::boolean AS late,
       sum(s.amount)::text AS amount, count(*) AS rows, count(DISTINCT i.id) AS settlements,
       min(e.id) AS first_row_id, max(e.id) AS last_row_id,
       coalesce(min((i.response ->> 'sequence')::bigint), 0)::bigint AS first_sequence,
       coalesce(max((i.response ->> 'sequence')::bigint), 0)::bigint AS last_sequence
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
 GROUP BY 1, 2, 3, 4, 5, 6
 ORDER BY 1, 6, 2, 3, 4, 5;
