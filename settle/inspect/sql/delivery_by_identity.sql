-- name: DeliveryByIdentity :many
-- Every delivery of one identity (deliveries_identity).
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, d.at, coalesce(d.identity_id, 0) AS identity_id,
       coalesce(d.case_id, 0) AS case_id
  FROM deliveries d
 WHERE d.identity_id = sqlc.arg(identity_id)::bigint
 ORDER BY d.at, d.topic, d.partition, d."offset";
