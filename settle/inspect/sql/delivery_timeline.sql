-- name: DeliveryTimeline :many
-- Deliveries per hour and outcome since since: the overview's chart. An
-- empty tenant means every tenant but hidden, the canary's (and the records
-- no tenant could be read of).
SELECT date_trunc('hour', d.at)::timestamptz AS hour, d.outcome, count(*)
  FROM deliveries d
 WHERE d.at >= sqlc.arg(since)::timestamptz
   AND (sqlc.arg(tenant)::text = '' AND d.tenant_id <> sqlc.arg(hidden)::text OR d.tenant_id = sqlc.arg(tenant))
 GROUP BY 1, 2
 ORDER BY 1, 2;
