-- name: ReconcilePruned :one
-- Whether settle prune ever removed delivery rows (repeats of closed
-- periods, dead letters, the canary tenant's identities): then offsets
-- without one are no longer a finding. A run that removed only published
-- outbox rows and done webhook deliveries leaves every delivery row in
-- place. tenant_pruned: whether the canary's retention (settle_prune_canary)
-- ever removed identities or dead letters of @tenant_id, so that its
-- records and settlements on the topics may have no rows any more.
SELECT EXISTS (SELECT 1 FROM prune_runs
                WHERE coalesce((removed ->> 'delivery_repeats')::bigint, 0) > 0
                   OR coalesce((removed ->> 'dead_letters')::bigint, 0) > 0
                   OR coalesce((removed ->> 'canary_identities')::bigint, 0) > 0
                   OR coalesce((removed ->> 'canary_dead_letters')::bigint, 0) > 0) AS pruned,
       EXISTS (SELECT 1 FROM prune_runs
                WHERE removed ->> 'canary_tenant' = @tenant_id::text
                  AND (coalesce((removed ->> 'canary_identities')::bigint, 0) > 0
                       OR coalesce((removed ->> 'canary_dead_letters')::bigint, 0) > 0)) AS tenant_pruned;
