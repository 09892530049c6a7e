-- name: IdempotencyTakeover :many
-- Takes over a claim whose lease expired (its attempt crashed or stalled):
-- swaps in the new attempt id only if the claim is still the expired one
-- that was read. Of two takers, one matches the row; the other gets nothing.
UPDATE idempotency_keys
   SET attempt_id  = $3,
       attempts    = attempts + 1,
       lease_until = now() + $4::bigint * interval '1 millisecond'
 WHERE id = $1
   AND attempt_id = $2
   AND status = 'in_progress'
   AND lease_until <= now()
RETURNING attempts;
