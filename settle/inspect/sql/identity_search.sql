-- name: IdentitySearch :many
-- Identities whose record_id or settlement_id is $3, for the analysts'
-- search. $1/$2 = '' mean any tenant/period. With tenant and period the
-- scope key finds them; with the tenant alone it is the key's prefix, read
-- to the end; without a tenant (and for a settlement id, which has no index
-- of its own: the hot path does not pay for one the analysts use rarely) it
-- is a scan, bounded by LIMIT and the request's timeout.
SELECT i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome, coalesce(i.settlement_id, ''),
       i.subject, i.currency, i.settlement_id IS NOT DISTINCT FROM $3
  FROM identities i
 WHERE ($1::text = '' OR i.tenant_id = $1)
   AND ($2::text = '' OR i.account_period = $2)
   AND (i.record_id = $3 OR i.settlement_id = $3)
 ORDER BY i.id DESC
 LIMIT $4;
