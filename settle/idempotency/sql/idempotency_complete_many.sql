-- name: IdempotencyCompleteMany :batchmany
-- The fenced write of a group's answers, one statement: each key's answer
-- is stored only if its attempt still owns the claim. Returns the ids it
-- stored; a key missing from them was taken over (or finished) and keeps
-- what it has.
UPDATE idempotency_keys AS k
   SET status          = 'done',
       response_status = r.status,
       response        = r.response,
       completed_at    = now()
  FROM unnest(@id::bigint[], (@attempt_id::text[])::uuid[], @status::int[], @response::bytea[])
       AS r(id, attempt_id, status, response)
 WHERE k.id = r.id
   AND k.attempt_id = r.attempt_id
   AND k.status = 'in_progress'
RETURNING k.id;
