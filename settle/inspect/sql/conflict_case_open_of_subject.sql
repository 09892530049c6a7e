-- name: ConflictCaseOpenOfSubject :many
-- The open cases of one subject of a tenant, oldest first: the account
-- page's cases, found by conflict_cases_open_subject (the subject of the
-- incoming record's canonical form, migration 25). Bounded by cases_max.
SELECT c.id, c.account_period, c.record_id, c.operation, c.reason, c.opened_at,
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'amount', '')::text AS incoming_amount,
       coalesce(convert_from(c.stored_canonical, 'UTF8')::jsonb ->> 'amount', '')::text AS stored_amount,
       coalesce(convert_from(c.incoming_canonical, 'UTF8')::jsonb ->> 'currency', '')::text AS currency
  FROM conflict_cases c
 WHERE c.status = 'open' AND c.tenant_id = sqlc.arg(tenant)
   AND settle_canonical_subject(c.incoming_canonical) = sqlc.arg(subject)::text
 ORDER BY c.opened_at, c.id
 LIMIT sqlc.arg(cases_max);
