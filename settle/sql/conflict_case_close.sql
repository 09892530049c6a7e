-- name: ConflictCaseClose :exec
-- Closes orphan cases whose operation was applied when its target arrived.
-- A case is open exactly while its closed_at is NULL (this statement and
-- conflict_case_resolve.sql set both). That, not status = 'open', is the
-- condition: status leads conflict_cases_status_opened, and a generic plan
-- made on an empty table scanned that index's every open case for each
-- close instead of probing the primary key by id.
UPDATE conflict_cases SET status = 'auto_resolved', closed_at = now()
 WHERE id = ANY (@ids::bigint[]) AND closed_at IS NULL;
