-- name: Prune :many
-- Removes (or with $2 only counts) the operational history settle_prune
-- allows: published outbox rows, repeated deliveries of closed periods, dead
-- letters older than $1 (NULL: none). One row per table.
SELECT table_name, rows FROM settle_prune(sqlc.narg(dead_letters_before)::timestamptz, @dry_run::boolean);

-- name: PruneCanary :many
-- Removes (or with dry_run only counts) the canary tenant's whole accounts
-- whose every row is older than the cutoff, with their identities, ledger
-- rows, chains, holds, cases and published messages (settle_prune_canary,
-- migration 23). One row per table.
SELECT table_name, rows FROM settle_prune_canary(@before::timestamptz, @dry_run::boolean);
