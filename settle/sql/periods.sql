-- name: PeriodClose :batchone
INSERT INTO periods (tenant_id, account_period, closed_by) VALUES ($1, $2, $3)
    ON CONFLICT ON CONSTRAINT periods_pkey DO NOTHING
RETURNING closed_at;

-- name: PeriodLock :batchexec
-- Locks a transaction's period slices, in the order given (sorted, so no
-- two transactions wait on each other here): shared (@x false) by every
-- transaction that claims an identity in the slice, exclusive (@x true) by
-- one that leaves an operation waiting for a target in it, and by period
-- close for every slice. Taken before anything is read, so the reads after
-- it see every transaction the lock waited for. Two-key advisory locks (the
-- slice from 1<<16 up, the period's hash) live apart from the relay's
-- single-key lock.
SELECT CASE WHEN k.x THEN pg_advisory_xact_lock(k.a, k.b) ELSE pg_advisory_xact_lock_shared(k.a, k.b) END
  FROM unnest(@a::int[], @b::int[], @x::bool[]) AS k (a, b, x);

-- name: PeriodLookup :batchmany
-- Closed periods among a batch's (tenant, period) pairs.
SELECT p.tenant_id, p.account_period
  FROM unnest(@tenant_id::text[], @account_period::text[]) AS k (tenant_id, account_period)
  JOIN periods p ON p.tenant_id = k.tenant_id AND p.account_period = k.account_period;
