-- name: ConflictCaseSearch :many
-- Cases of a record_id, or the case whose id is case_id (0 = none), for
-- the analysts' search. An empty tenant or period means any.
SELECT c.id, c.tenant_id, c.account_period, c.record_id, c.operation, c.reason, c.status
  FROM conflict_cases c
 WHERE c.id = sqlc.arg(case_id)
    OR ((sqlc.arg(tenant)::text = '' OR c.tenant_id = sqlc.arg(tenant))
        AND (sqlc.arg(period)::text = '' OR c.account_period = sqlc.arg(period))
        AND c.record_id = sqlc.arg(record_id))
 ORDER BY c.id DESC
 LIMIT sqlc.arg(hits_max);
