-- name: ConflictCaseList :many
-- One page of the analysts' queue, newest first, keyset-paged on
-- (opened_at, id). An empty filter argument means "any". Run with
-- parameters bound at plan time (pgx QueryExecModeExec: an unnamed
-- statement, always a custom plan), so the "$n = ''" branches fold away and
-- the planner sees plain equalities it can match with conflict_cases_queue
-- (status, tenant_id, reason, opened_at DESC, id DESC).
SELECT c.id, c.tenant_id, c.account_period, c.record_id, c.operation, c.reason, c.status,
       c.opened_at, c.closed_at, c.detail,
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'subject', ''),
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'amount', ''),
       coalesce(convert_from(c.stored_canonical, 'UTF8')::jsonb ->> 'amount', ''),
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'currency', '')
  FROM conflict_cases c
 WHERE ($1::text = '' OR c.status = $1)
   AND ($2::text = '' OR c.tenant_id = $2)
   AND ($3::text = '' OR c.reason = $3)
   AND ($4::text = '' OR c.account_period = $4)
   AND ($5::timestamptz IS NULL OR c.opened_at <= $5)
   AND ($6::timestamptz IS NULL OR c.opened_at >= $6)
   AND ($7::timestamptz IS NULL OR (c.opened_at, c.id) < ($7, $8::bigint))
 ORDER BY c.opened_at DESC, c.id DESC
 LIMIT $9;
