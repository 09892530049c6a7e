-- name: SourceSettledScan :many
-- One page of the settled identities of a tenant's period range (from_period
-- to to_period) and operations, keyset-paged on id: settle's side of a
-- source export, read once, to find what the source lacks.
SELECT i.id, i.account_period, i.record_id, i.operation, coalesce(i.settlement_id, '') AS settlement_id, i.subject, i.currency
  FROM identities i
 WHERE i.tenant_id = sqlc.arg(tenant_id) AND i.account_period >= sqlc.arg(from_period) AND i.account_period <= sqlc.arg(to_period)
   AND i.operation = ANY (sqlc.arg(operations)::text[]) AND i.outcome = 'settled'
   AND i.id > sqlc.arg(after_id)
 ORDER BY i.id
 LIMIT sqlc.arg(page_rows);
