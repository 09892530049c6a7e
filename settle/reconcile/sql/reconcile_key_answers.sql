-- name: ReconcileKeyAnswers :many
-- The stored state of the Idempotency-Keys a caller was answered for
-- (tenant_id, key pairs), to compare with the answers it got: every one
-- must be done, with those bytes. A key not stored comes back with no
-- status.
SELECT x.tenant_id, x.key, coalesce(k.status, '')::text AS status, k.response
  FROM unnest(@tenant_id::text[], @key::text[]) AS x (tenant_id, key)
  LEFT JOIN idempotency_keys k ON k.tenant_id = x.tenant_id AND k.key = x.key
 ORDER BY x.tenant_id, x.key;
