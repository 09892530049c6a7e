-- name: DeliveryByCase :many
-- Every delivery that joined a case, in arrival order.
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, d.at, coalesce(d.identity_id, 0), coalesce(d.case_id, 0)
  FROM deliveries d
 WHERE d.case_id = $1
 ORDER BY d.at, d.topic, d.partition, d."offset";
