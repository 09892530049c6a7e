-- name: ConflictCaseByRecord :many
-- Every case of one record_id (all operations): served by the leading
-- columns of conflict_cases_key.
SELECT c.id
  FROM conflict_cases c
 WHERE c.tenant_id = $1 AND c.account_period = $2 AND c.record_id = $3
 ORDER BY c.id;
