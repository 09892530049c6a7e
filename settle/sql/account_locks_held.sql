-- name: AccountLocksHeld :exec
-- Fails unless this transaction holds the lock (account_lock.sql) of every
-- account it writes ledger rows to (settle_locked, migration 0016): an
-- account's state is its newest row, and the lock is what keeps a second
-- writer from appending beside it.
SELECT settle_locked('account_lock', @ids::bigint[]);
