-- name: WebhookRetry :exec
-- A failed attempt puts its delivery back for another attempt after a
-- backoff of $3 ms, counting the failure; fenced like every write of a
-- claim.
UPDATE webhook_deliveries
   SET status          = 'pending',
       failures        = failures + 1,
       lease_until     = NULL,
       next_attempt_at = now() + $3::bigint * interval '1 millisecond',
       last_status     = nullif($4::integer, 0),
       last_error      = $5
 WHERE id = $1
   AND attempt_id = $2::uuid
   AND status = 'in_flight';
