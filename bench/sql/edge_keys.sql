-- The answered Idempotency-Keys of an edge run's tenant and the bytes each
-- stored, to compare with what its clients were answered.
SELECT key, settle_key_answer(tenant_id, answer, answer_identities, answer_at)
  FROM idempotency_keys
 WHERE tenant_id = $1
   AND status = 'done'
