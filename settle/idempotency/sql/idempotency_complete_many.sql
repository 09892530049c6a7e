-- name: IdempotencyCompleteMany :exec
-- Stores the answers of keys taken over by idempotency_takeover_many.sql
-- in the same transaction, which holds their rows: each where this
-- attempt owns the claim, the identities its answer quotes and where the
-- slices quote_identity[qlo:qhi] and quote_at[qlo:qhi] of the flat arrays
-- (as idempotency_insert_done.sql).
UPDATE idempotency_keys AS k
   SET status            = 'done',
       response_status   = r.status,
       answer            = r.answer,
       answer_identities = (@quote_identity::bigint[])[r.qlo:r.qhi],
       answer_at         = (@quote_at::int[])[r.qlo:r.qhi],
       completed_at      = now()
  FROM unnest(@id::bigint[], (@attempt_id::text[])::uuid[], @status::int[], @answer::bytea[], @qlo::int[], @qhi::int[])
       AS r(id, attempt_id, status, answer, qlo, qhi)
 WHERE k.id = r.id
   AND k.attempt_id = r.attempt_id
   AND k.status = 'in_progress';
