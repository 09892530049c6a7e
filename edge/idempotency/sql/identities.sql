-- name: IdempotencyIdentityLookup :one
-- The identity row a conflicting Idempotency-Key request collides with,
-- 0 when that record never claimed an identity (it waits, for instance).
SELECT coalesce((SELECT id FROM identities
                  WHERE tenant_id = @tenant_id AND account_period = @account_period
                    AND record_id = @record_id AND operation = @operation), 0)::bigint AS identity_id;
