-- name: IdempotencyCompleteMany :exec
-- Stores the answers of keys taken over by idempotency_takeover_many.sql
-- in the same transaction, which holds their rows: each where this
-- attempt owns the claim.
UPDATE idempotency_keys AS k
   SET status          = 'done',
       response_status = r.status,
       response        = r.response,
       completed_at    = now()
  FROM unnest(@id::bigint[], (@attempt_id::text[])::uuid[], @status::int[], @response::bytea[])
       AS r(id, attempt_id, status, response)
 WHERE k.id = r.id
   AND k.attempt_id = r.attempt_id
   AND k.status = 'in_progress';
