-- Per-record baseline: claim one identity with its response; no row when it
-- is already claimed (a duplicate).
INSERT INTO bl_identities (tenant_id, account_period, record_id, operation, fingerprint, canonical, response)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT ON CONSTRAINT bl_identities_scope_key DO NOTHING
RETURNING id
