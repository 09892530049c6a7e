-- name: WebhookClaim :many
-- Claims up to $1 deliveries that are due (pending past next_attempt_at) or
-- whose lease expired (their attempt crashed or stalled), each for a new
-- attempt id and a lease of $2 ms. SKIP LOCKED: concurrent workers claim
-- different rows; the new attempt id fences out the attempt it replaced.
-- A claim counts nothing: attempts counts the sends started
-- (webhook_attempt_start.sql) and failures the attempts that failed, so a
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
