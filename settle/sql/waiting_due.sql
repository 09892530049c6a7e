-- name: WaitingDue :many
-- Waiting operations older than the orphan timeout, a page at a time;
-- skipped when another sweeper holds them.
SELECT w.tenant_id, w.account_period, w.record_id, w.operation
  FROM waiting w
 WHERE w.status = 'waiting' AND w.since < now() - $1::interval
 ORDER BY w.id
 LIMIT $2
   FOR UPDATE SKIP LOCKED;
