-- name: WebhookComplete :exec
-- The fenced write of a delivered settlement: only the attempt that owns
-- the claim marks it done.
UPDATE webhook_deliveries
   SET status      = 'done',
       done_at     = now(),
       lease_until = NULL,
       last_status = $3,
       last_error  = ''
 WHERE id = $1
   AND attempt_id = $2::uuid
   AND status = 'in_flight';
