-- name: ReconcilePruned :one
-- Whether settle prune ever removed delivery rows (repeats of closed
-- periods, dead letters): then offsets without one are no longer a
-- finding. A run that removed only published outbox rows and done webhook
-- deliveries leaves every delivery row in place.
SELECT EXISTS (SELECT 1 FROM prune_runs
                WHERE coalesce((removed ->> 'delivery_repeats')::bigint, 0) > 0
                   OR coalesce((removed ->> 'dead_letters')::bigint, 0) > 0) AS pruned;
