-- name: ConflictCaseClose :exec
-- Closes orphan cases whose operation was applied when its target arrived.
UPDATE conflict_cases SET status = 'auto_resolved', closed_at = now()
 WHERE id = ANY (@ids::bigint[]) AND status = 'open';
