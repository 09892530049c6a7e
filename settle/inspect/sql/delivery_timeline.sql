-- name: DeliveryTimeline :many
-- Deliveries per hour and outcome since since: the overview's chart.
SELECT date_trunc('hour', d.at)::timestamptz AS hour, d.outcome, count(*)
  FROM deliveries d
 WHERE d.at >= sqlc.arg(since)::timestamptz
 GROUP BY 1, 2
 ORDER BY 1, 2;
