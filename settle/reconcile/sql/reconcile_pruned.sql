-- name: ReconcilePruned :one
-- Whether settle prune ever ran: it removes delivery rows (repeats of
-- closed periods, old dead letters), so offsets without one are no longer
-- a finding.
SELECT EXISTS (SELECT 1 FROM prune_runs) AS pruned;
