-- name: WebhookRetry :execrows
-- A failed attempt puts its delivery back for another attempt after a
-- backoff of $3 ms, counting the failure; fenced like every write of a
-- claim.
UPDATE webhook_deliveries
   SET status          = 'pending',
       failures        = failures + 1,
       lease_until     = NULL,
       next_attempt_at = now() + (@backoff_ms::bigint) * interval '1 millisecond',
       last_status     = nullif((@http_status::integer), 0),
       last_error      = @error_text::text
 WHERE id = @id
   AND attempt_id = (@attempt_id::text)::uuid
   AND status = 'in_flight';
