-- name: ConflictCaseCount :many
-- Cases by reason and status under the same filters as the queue (less
-- status, paging and age, so the counts show every status): the queue's
-- facets. An empty tenant or period means "any".
SELECT c.reason, c.status, count(*)
  FROM conflict_cases c
 WHERE (sqlc.arg(tenant)::text = '' OR c.tenant_id = sqlc.arg(tenant))
   AND (sqlc.arg(period)::text = '' OR c.account_period = sqlc.arg(period))
 GROUP BY c.reason, c.status
 ORDER BY c.reason, c.status;
