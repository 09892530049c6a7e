-- name: IdempotencyTakeover :one
-- Takes over a claim whose lease expired (its attempt crashed or stalled):
-- swaps in the new attempt id only if the claim is still the expired one
-- that was read. Of two takers, one matches the row; the other gets no row.
-- (sqlc.arg: after "+", @lease_ms would read as the prefix operator @.)
UPDATE idempotency_keys
   SET attempt_id  = (@attempt_id::text)::uuid,
       attempts    = attempts + 1,
       lease_until = now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond'
 WHERE id = @id
   AND attempt_id = (@holder::text)::uuid
   AND status = 'in_progress'
   AND lease_until <= now()
RETURNING attempts;
