-- name: PruneCanary :many
-- Removes (or with dry_run only counts) the canary tenant's whole accounts
-- whose every row is older than the cutoff, with their identities, ledger
-- rows, chains, holds, cases and published messages (settle_prune_canary,
-- migration 23). One row per table.
SELECT table_name, rows FROM settle_prune_canary(@before::timestamptz, @dry_run::boolean);
