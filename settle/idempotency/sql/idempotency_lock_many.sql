-- name: IdempotencyLockMany :batchmany
-- Takes the advisory lock of each Idempotency-Key of a group for the
-- settling transaction that claims, settles and answers it, without
-- waiting: locked is false for a key another transaction holds (its
-- request is answered busy). The lock is (class, hash) of the key
-- (idempotency.lockOf): its class is negative, apart from every other
-- lock of the schema. The next statement reads the keys, so its snapshot
-- comes after every transaction that held one of these locks committed.
SELECT r.ord::bigint AS ord, pg_try_advisory_xact_lock(r.class, r.hash) AS locked
  FROM unnest(@class::int[], @hash::int[]) WITH ORDINALITY AS r(class, hash, ord);
