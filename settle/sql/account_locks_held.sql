-- name: AccountLocksHeld :exec
-- Fails when another transaction holds the lock (account_lock.sql) of an
-- account this one writes ledger rows to (settle_locked, migration 0016):
-- an account's state is its newest row, and the lock is what keeps a
-- second writer from appending beside it. A lock this transaction holds
-- passes at once (pg_locks would name the holder too, but copies the whole
-- lock table: BENCHMARKS.md, "Tried and not kept").
SELECT settle_locked('account_lock', @ids::bigint[]);
