-- Closes orphan cases whose operation was applied when its target arrived.
UPDATE conflict_cases SET status = 'auto_resolved', closed_at = now()
 WHERE id = ANY ($1::bigint[]) AND status = 'open'
