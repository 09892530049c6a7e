-- name: DeliveryByIdentity :many
-- Every delivery of one identity (deliveries_identity).
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, d.at, coalesce(d.identity_id, 0), coalesce(d.case_id, 0)
  FROM deliveries d
 WHERE d.identity_id = $1
 ORDER BY d.at, d.topic, d.partition, d."offset";
