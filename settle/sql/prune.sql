-- name: Prune :many
-- Removes (or with $2 only counts) the operational history settle_prune
-- allows: published outbox rows, repeated deliveries of closed periods, dead
-- letters older than $1 (NULL: none). One row per table.
SELECT table_name, rows FROM settle_prune(sqlc.narg(dead_letters_before)::timestamptz, @dry_run::boolean);
