-- name: WaitingByRecord :many
-- Operations of one record_id that waited or wait (waiting_scope_key), and
-- operations waiting for it as their target (waiting_target).
SELECT w.id, w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id, w.status,
       coalesce(w.case_id, 0), w.since, w.topic, w.partition, w."offset", w.response
  FROM waiting w
 WHERE w.tenant_id = $1 AND w.account_period = $2 AND w.record_id = $3
 UNION ALL
SELECT w.id, w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id, w.status,
       coalesce(w.case_id, 0), w.since, w.topic, w.partition, w."offset", w.response
  FROM waiting w
 WHERE w.tenant_id = $1 AND w.target_period = $2 AND w.target_record_id = $3 AND w.status <> 'applied'
 ORDER BY 1;
