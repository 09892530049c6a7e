-- name: IdempotencyRelease :execrows
-- Ends a claim's lease early after a failure that settled nothing for sure,
-- so the client's retry takes the key over at once instead of waiting out
-- the lease. Fenced like every write of a claim.
UPDATE idempotency_keys
   SET lease_until = now()
 WHERE id = @id
   AND attempt_id = (@attempt_id::text)::uuid
   AND status = 'in_progress';
