-- name: WebhookDead :execrows
-- The last attempt failed, or sends that never wrote a result reached the
-- bound: the delivery is dead-lettered (see the view webhook_dead_letters).
-- $5 is 1 when this attempt sent and failed (a failure counted), 0 when it
-- gives up without sending. Fenced like every write of a claim.
UPDATE webhook_deliveries
   SET status      = 'dead',
       failures    = failures + (@failed::integer),
       done_at     = now(),
       lease_until = NULL,
       last_status = nullif((@http_status::integer), 0),
       last_error  = @error_text::text
 WHERE id = @id
   AND attempt_id = (@attempt_id::text)::uuid
   AND status = 'in_flight';
