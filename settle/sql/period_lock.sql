-- Locks a transaction's (tenant, period) pairs, in the order given (sorted
-- by key, so no two transactions wait on each other here): shared ($2
-- false) by every transaction that settles in the period, exclusive ($2
-- true) by one that closes it or that leaves an operation waiting for a
-- target in it. Taken before anything is read, so the reads after it see
-- every transaction the lock waited for. Advisory locks with two int4 keys
-- (class 1 = tenant period) live in their own space, apart from the
-- relay's single-key lock.
SELECT CASE WHEN k.x THEN pg_advisory_xact_lock(1, k.k) ELSE pg_advisory_xact_lock_shared(1, k.k) END
  FROM unnest($1::int[], $2::bool[]) AS k (k, x)
