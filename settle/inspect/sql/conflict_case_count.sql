-- name: ConflictCaseCount :many
-- Cases by reason and status under the same filters as the queue (less
-- status, paging and age, so the counts show every status): the queue's
-- facets.
SELECT c.reason, c.status, count(*)
  FROM conflict_cases c
 WHERE ($1::text = '' OR c.tenant_id = $1)
   AND ($2::text = '' OR c.account_period = $2)
 GROUP BY c.reason, c.status
 ORDER BY c.reason, c.status;
