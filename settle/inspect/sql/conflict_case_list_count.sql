-- name: ConflictCaseListCount :one
-- How many cases the queue's filters select, counting no further than
-- rows_max (a bound above the export's cap is all an export needs to know).
-- Filters as in conflict_case_list.sql, without the cursor.
SELECT count(*)
  FROM (SELECT 1
          FROM conflict_cases c
         WHERE (sqlc.arg(status)::text = '' OR c.status = sqlc.arg(status))
           AND (sqlc.arg(tenant)::text = '' OR c.tenant_id = sqlc.arg(tenant))
           AND (sqlc.arg(reason)::text = '' OR c.reason = sqlc.arg(reason))
           AND (sqlc.arg(period)::text = '' OR c.account_period = sqlc.arg(period))
           AND (sqlc.narg(opened_before)::timestamptz IS NULL OR c.opened_at <= sqlc.narg(opened_before))
           AND (sqlc.narg(opened_after)::timestamptz IS NULL OR c.opened_at >= sqlc.narg(opened_after))
         LIMIT sqlc.arg(rows_max)) x;
