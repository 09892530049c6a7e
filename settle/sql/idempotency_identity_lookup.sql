-- name: IdempotencyIdentityLookup :many
-- The identity row a conflicting Idempotency-Key request collides with,
-- 0 when that record never claimed an identity (it waits, for instance).
SELECT coalesce((SELECT id FROM identities
                  WHERE tenant_id = $1 AND account_period = $2 AND record_id = $3 AND operation = $4), 0);
