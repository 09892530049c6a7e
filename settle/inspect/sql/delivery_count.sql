-- name: DeliveryCount :many
-- Deliveries by outcome and reason: what `settle dev` summarises.
SELECT outcome, reason, count(*)
  FROM deliveries
 GROUP BY outcome, reason
 ORDER BY outcome, reason;
