-- name: ConflictCaseOpenAges :many
-- Open cases by age: for each case, how many of the cut-offs (opened_at
-- bounds, newest first) it is older than; the overview's age buckets.
-- An empty tenant means every tenant.
SELECT b.older_than, count(*)
  FROM conflict_cases c
  CROSS JOIN LATERAL (SELECT count(*) AS older_than FROM unnest(sqlc.arg(cutoffs)::timestamptz[]) t WHERE c.opened_at <= t) b
 WHERE c.status = 'open'
   AND (sqlc.arg(tenant)::text = '' OR c.tenant_id = sqlc.arg(tenant))
 GROUP BY b.older_than
 ORDER BY b.older_than;
