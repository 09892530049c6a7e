-- name: IdentitySearch :many
-- Identities whose record_id or settlement_id is term, for the analysts'
-- search. An empty tenant or period means any. With tenant and period the
-- scope key finds them; with the tenant alone it is the key's prefix, read
-- to the end; without a tenant (and for a settlement id, which has no index
-- of its own: the hot path does not pay for one the analysts use rarely) it
-- is a scan, bounded by LIMIT and the request's timeout.
SELECT i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome, coalesce(i.settlement_id, '') AS settlement_id,
       i.subject, i.currency, i.settlement_id IS NOT DISTINCT FROM sqlc.arg(term)::text AS by_settlement
  FROM identities i
 WHERE (sqlc.arg(tenant)::text = '' OR i.tenant_id = sqlc.arg(tenant))
   AND (sqlc.arg(period)::text = '' OR i.account_period = sqlc.arg(period))
   AND (i.record_id = sqlc.arg(term) OR i.settlement_id = sqlc.arg(term))
 ORDER BY i.id DESC
 LIMIT sqlc.arg(hits_max);
