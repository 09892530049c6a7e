-- name: ConflictCaseResolve :exec
UPDATE conflict_cases SET status = @status, closed_at = now() WHERE id = @id AND status = 'open';
