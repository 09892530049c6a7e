-- name: IdempotencyComplete :execrows
-- The fenced write: stores the answer only if this attempt still owns the
-- claim. An attempt that was taken over matches no row.
UPDATE idempotency_keys
   SET status          = 'done',
       response_status = @response_status::int,
       response        = @response,
       completed_at    = now()
 WHERE id = @id
   AND attempt_id = (@attempt_id::text)::uuid
   AND status = 'in_progress';
