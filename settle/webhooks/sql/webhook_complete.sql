-- name: WebhookComplete :execrows
-- The fenced write of a delivered settlement: only the attempt that owns
-- the claim marks it done.
UPDATE webhook_deliveries
   SET status      = 'done',
       done_at     = now(),
       lease_until = NULL,
       last_status = @http_status::integer,
       last_error  = ''
 WHERE id = @id
   AND attempt_id = (@attempt_id::text)::uuid
   AND status = 'in_flight';
