-- name: ConflictCaseSearch :many
-- Cases of a record_id ($3), or the case whose id is $4 (0 = none), for
-- the analysts' search. $1/$2 = '' mean any tenant/period.
SELECT c.id, c.tenant_id, c.account_period, c.record_id, c.operation, c.reason, c.status
  FROM conflict_cases c
 WHERE c.id = $4
    OR (($1::text = '' OR c.tenant_id = $1)
        AND ($2::text = '' OR c.account_period = $2)
        AND c.record_id = $3)
 ORDER BY c.id DESC
 LIMIT $5;
