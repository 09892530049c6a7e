-- name: ReconcileDeliveryOutcomes :many
-- Delivery rows by outcome (topic, '' = all), for the comparison with
-- what a known input must have produced.
SELECT d.outcome::text AS outcome, count(*) AS deliveries
  FROM deliveries d
 WHERE (@topic::text = '' OR d.topic = @topic)
 GROUP BY d.outcome;
