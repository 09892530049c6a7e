-- name: ReconcileKeyAnswers :many
-- The stored state of the Idempotency-Keys a caller was answered for
-- (tenant_id, key pairs), to compare with the answers it got: every one
-- must be done, with those bytes. A key not stored comes back with no
-- status. The bytes are the answer with the identities it quotes put
-- back (settle_key_answer, migration 0020).
SELECT x.tenant_id, x.key, coalesce(k.status, '')::text AS status, settle_key_answer(k.tenant_id, k.answer, k.answer_identities, k.answer_at)::bytea AS response
  FROM unnest(@tenant_id::text[], @key::text[]) AS x (tenant_id, key)
  LEFT JOIN idempotency_keys k ON k.tenant_id = x.tenant_id AND k.key = x.key
 ORDER BY x.tenant_id, x.key;
