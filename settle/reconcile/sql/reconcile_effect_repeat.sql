-- name: ReconcileEffectRepeat :many
-- Identities whose ledger rows were written by more than one transaction,
-- or that wrote more than one row in one bucket: an effect applied more
-- than once. Rows of one transaction share created_at (now() is the
-- transaction's start); every operation writes at most one row per bucket
-- (tenant_id, '' = all).
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation,
       coalesce(i.settlement_id, '') AS settlement_id, count(DISTINCT l.created_at) AS transactions,
       count(*) AS rows, count(DISTINCT l.bucket) AS buckets
  FROM ledger_entries l
  JOIN identities i ON i.tenant_id = l.tenant_id AND i.id = l.identity_id
 WHERE (@tenant_id::text = '' OR i.tenant_id = @tenant_id)
 GROUP BY i.tenant_id, i.id
HAVING count(DISTINCT l.created_at) > 1 OR count(*) > count(DISTINCT l.bucket)
 ORDER BY i.id;
