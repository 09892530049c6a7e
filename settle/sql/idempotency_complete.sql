-- name: IdempotencyComplete :exec
-- The fenced write: stores the answer only if this attempt still owns the
-- claim. An attempt that was taken over matches no row.
UPDATE idempotency_keys
   SET status          = 'done',
       response_status = $3,
       response        = $4,
       completed_at    = now()
 WHERE id = $1
   AND attempt_id = $2
   AND status = 'in_progress';
