-- name: ReconcileOpenCases :one
-- How many conflict cases are open (the settle_conflict_cases_open gauge).
SELECT count(*) FROM conflict_cases WHERE status = 'open';
