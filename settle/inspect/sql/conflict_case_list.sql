-- name: ConflictCaseList :many
-- One page of the analysts' queue, newest first, keyset-paged on
-- (opened_at, id). An empty filter argument means "any". Run with
-- parameters bound at plan time (pgx QueryExecModeExec: an unnamed
-- statement, always a custom plan), so the "= ''" branches fold away and
-- the planner sees plain equalities it can match with conflict_cases_queue
-- (status, tenant_id, reason, opened_at DESC, id DESC).
SELECT c.id, c.tenant_id, c.account_period, c.record_id, c.operation, c.reason, c.status,
       c.opened_at, c.closed_at, c.detail,
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'subject', '')::text AS subject,
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'amount', '')::text AS incoming_amount,
       coalesce(convert_from(c.stored_canonical, 'UTF8')::jsonb ->> 'amount', '')::text AS stored_amount,
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'currency', '')::text AS currency,
       -- The fields whose values differ between the stored and the incoming
       -- record, by name, space-separated ('' without a stored record): read
       -- for the page's rows only.
       (CASE WHEN c.stored_canonical IS NULL THEN '' ELSE coalesce(
          (SELECT string_agg(key, ' ' ORDER BY key)
             FROM jsonb_each_text(convert_from(c.incoming_canonical, 'UTF8')::jsonb) i
             FULL JOIN jsonb_each_text(convert_from(c.stored_canonical, 'UTF8')::jsonb) s USING (key)
            WHERE i.value IS DISTINCT FROM s.value), '') END)::text AS differs
  FROM conflict_cases c
 WHERE (sqlc.arg(status)::text = '' OR c.status = sqlc.arg(status))
   AND (sqlc.arg(tenant)::text = '' OR c.tenant_id = sqlc.arg(tenant))
   AND (sqlc.arg(reason)::text = '' OR c.reason = sqlc.arg(reason))
   AND (sqlc.arg(period)::text = '' OR c.account_period = sqlc.arg(period))
   AND (sqlc.narg(opened_before)::timestamptz IS NULL OR c.opened_at <= sqlc.narg(opened_before))
   AND (sqlc.narg(opened_after)::timestamptz IS NULL OR c.opened_at >= sqlc.narg(opened_after))
   AND (sqlc.narg(after_opened_at)::timestamptz IS NULL OR (c.opened_at, c.id) < (sqlc.narg(after_opened_at), sqlc.arg(after_id)::bigint))
 ORDER BY c.opened_at DESC, c.id DESC
 LIMIT sqlc.arg(page_rows);
