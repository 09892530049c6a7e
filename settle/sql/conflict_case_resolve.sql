-- name: ConflictCaseResolve :exec
UPDATE conflict_cases SET status = $2, closed_at = now() WHERE id = $1 AND status = 'open';
