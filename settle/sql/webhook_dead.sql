-- The last attempt failed: the delivery is dead-lettered (see the view
-- webhook_dead_letters). Fenced like every write of a claim.
UPDATE webhook_deliveries
   SET status      = 'dead',
       done_at     = now(),
       lease_until = NULL,
       last_status = nullif($3::integer, 0),
       last_error  = $4
 WHERE id = $1
   AND attempt_id = $2::uuid
   AND status = 'in_flight'
