-- name: ReconcileIdentityEffects :many
-- Every identity with its outcome and its ledger rows (bucket, amount),
-- for the comparison with a model of what they must be (tenant_id, '' =
-- all).
SELECT i.tenant_id, i.account_period, i.record_id, i.operation, i.outcome,
       coalesce(array_agg(l.bucket ORDER BY l.id) FILTER (WHERE l.id IS NOT NULL), '{}')::text[] AS buckets,
       coalesce(array_agg(l.amount::text ORDER BY l.id) FILTER (WHERE l.id IS NOT NULL), '{}')::text[] AS amounts
  FROM identities i
  LEFT JOIN ledger_entries l ON l.tenant_id = i.tenant_id AND l.identity_id = i.id
 WHERE (@tenant_id::text = '' OR i.tenant_id = @tenant_id)
 GROUP BY i.tenant_id, i.id;
