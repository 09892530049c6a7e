-- name: PeriodClose :batchone
INSERT INTO periods (tenant_id, account_period, closed_by) VALUES ($1, $2, $3)
    ON CONFLICT ON CONSTRAINT periods_pkey DO NOTHING
RETURNING closed_at;
