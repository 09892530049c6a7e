-- name: PeriodGet :one
-- One period's close, if it is closed.
SELECT closed_at, closed_by FROM periods WHERE tenant_id = $1 AND account_period = $2;
