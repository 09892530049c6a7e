-- name: WebhookClaim :many
-- Claims up to $1 deliveries that are due (pending past next_attempt_at) or
-- whose lease expired (their attempt crashed or stalled), each for a new
-- attempt id and a lease of $2 ms. SKIP LOCKED: concurrent workers claim
-- different rows; the new attempt id fences out the attempt it replaced.
-- A claim counts nothing: attempts counts the sends started
-- (webhook_deliveries.sql's WebhookAttemptStart) and failures the attempts that failed, so a
-- claim taken over before it sent costs nothing. took_over says the row
-- was in flight: its last attempt ended without writing a result.
WITH due AS (
    SELECT id, status = 'in_flight' AS took_over
      FROM webhook_deliveries
     WHERE (status = 'pending' AND next_attempt_at <= now())
        OR (status = 'in_flight' AND lease_until <= now())
     ORDER BY id
     LIMIT @max_rows::integer
       FOR UPDATE SKIP LOCKED
)
UPDATE webhook_deliveries w
   SET status      = 'in_flight',
       attempt_id  = gen_random_uuid(),
       lease_until = now() + (@lease_ms::bigint) * interval '1 millisecond'
  FROM due
 WHERE w.id = due.id
RETURNING w.id, w.outbox_id, w.attempt_id::text AS attempt_id, w.attempts, w.failures, due.took_over, w.tenant_id, w.settlement_id, w.body;

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
