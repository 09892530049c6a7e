-- name: SourceSettledScan :many
-- One page of the settled identities of a tenant's period range and
-- operations, keyset-paged on id: settle's side of a source export, read
-- once, to find what the source lacks.
SELECT i.id, i.account_period, i.record_id, i.operation, coalesce(i.settlement_id, ''), i.subject, i.currency
  FROM identities i
 WHERE i.tenant_id = $1 AND i.account_period >= $2 AND i.account_period <= $3
   AND i.operation = ANY ($4::text[]) AND i.outcome = 'settled'
   AND i.id > $5
 ORDER BY i.id
 LIMIT $6;
