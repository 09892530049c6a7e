-- name: IdempotencyTakeoverMany :batchmany
-- Takes over keys an earlier version of settle left in progress past their
-- lease (its attempt crashed or stalled): swaps in this attempt's id only
-- where the claim is still the expired one that was read (holder), and
-- holds the rows until the transaction that settles and answers them
-- commits. Returns the ids taken over; a key missing from them moved
-- meanwhile.
UPDATE idempotency_keys AS k
   SET attempt_id  = r.attempt_id,
       attempts    = k.attempts + 1,
       lease_until = now()
  FROM unnest(@id::bigint[], (@holder::text[])::uuid[], (@attempt_id::text[])::uuid[]) AS r(id, holder, attempt_id)
 WHERE k.id = r.id
   AND k.attempt_id = r.holder
   AND k.status = 'in_progress'
   AND k.lease_until <= now()
RETURNING k.id;
