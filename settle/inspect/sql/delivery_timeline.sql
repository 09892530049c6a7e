-- name: DeliveryTimeline :many
-- Deliveries per hour and outcome since $1: the overview's chart.
SELECT date_trunc('hour', d.at), d.outcome, count(*)
  FROM deliveries d
 WHERE d.at >= $1
 GROUP BY 1, 2
 ORDER BY 1, 2;
