-- name: WaitingDue :many
-- Waiting operations older than the orphan timeout, a page at a time;
-- skipped when another sweeper holds them.
SELECT w.tenant_id, w.account_period, w.record_id, w.operation
  FROM waiting w
 WHERE w.status = 'waiting' AND w.since < now() - (@older_than_ms::bigint) * interval '1 millisecond'
 ORDER BY w.id
 LIMIT @max_rows::integer
   FOR UPDATE SKIP LOCKED;
