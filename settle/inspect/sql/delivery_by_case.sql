-- name: DeliveryByCase :many
-- Every delivery that joined a case, in arrival order.
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, d.at, coalesce(d.identity_id, 0) AS identity_id,
       coalesce(d.case_id, 0) AS case_id
  FROM deliveries d
 WHERE d.case_id = sqlc.arg(case_id)::bigint
 ORDER BY d.at, d.topic, d.partition, d."offset";
