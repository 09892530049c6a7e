-- name: WebhookAttemptStart :one
-- An attempt is about to POST its delivery: it renews its lease to $3 ms
-- from now and counts the send. Fenced on the attempt id alone: an attempt
-- whose lease lapsed but that nobody took over still owns the row (the
-- claim that would take it over changes the attempt id under the same row
-- lock), so renewing it cannot overlap another attempt.
UPDATE webhook_deliveries
   SET lease_until = now() + (@lease_ms::bigint) * interval '1 millisecond',
       attempts    = attempts + 1
 WHERE id = @id
   AND attempt_id = (@attempt_id::text)::uuid
   AND status = 'in_flight'
RETURNING attempts;
