-- name: SourceWaiting :many
-- One chunk of a source export's identities that settle has not stored:
-- the ones still waiting for their target (or orphaned, with their case).
SELECT w.account_period, w.record_id, w.operation, w.status, w.target_period, w.target_record_id,
       w.since, coalesce(w.case_id, 0) AS case_id
  FROM unnest(sqlc.arg(periods)::text[], sqlc.arg(record_ids)::text[], sqlc.arg(operations)::text[]) AS k (account_period, record_id, operation)
  JOIN waiting w ON w.tenant_id = sqlc.arg(tenant_id) AND w.account_period = k.account_period
                AND w.record_id = k.record_id AND w.operation = k.operation
 WHERE w.status <> 'applied';
