-- name: SourceSettledScan :many
-- One page of the settled identities of a tenant's period range (from_period
-- to to_period) and operations: settle's side of a source export, read once,
-- to find what the source lacks. Paged by the identity's key, after the
-- last page's (after_period, after_record_id, after_operation; the first
-- page starts after (from_period, '', '')), in the order of the key's
-- unique index (identities_scope_key), so each page is one range of that
-- index, whatever the planner's statistics say: ordered by id, a page of a
-- freshly loaded, un-analysed tenant read every identity of the tenant.
-- The operations are a filter, not an index condition: "operation = ANY"
-- on the index's last column makes PostgreSQL (before 17) scan it as
-- several ranges, unordered, and sort the whole remainder each page.
SELECT i.id, i.account_period, i.record_id, i.operation, coalesce(i.settlement_id, '') AS settlement_id, i.subject, i.currency
  FROM identities i
 WHERE i.tenant_id = sqlc.arg(tenant_id)
   AND (i.account_period, i.record_id, i.operation) > (sqlc.arg(after_period)::text, sqlc.arg(after_record_id)::text, sqlc.arg(after_operation)::text)
   AND i.account_period <= sqlc.arg(to_period)
   AND array_position(sqlc.arg(operations)::text[], i.operation) IS NOT NULL AND i.outcome = 'settled'
 ORDER BY i.tenant_id, i.account_period, i.record_id, i.operation
 LIMIT sqlc.arg(page_rows);
