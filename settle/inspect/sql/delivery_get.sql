-- name: DeliveryGet :many
-- The delivery row of one input record.
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, d.at, coalesce(d.identity_id, 0), coalesce(d.case_id, 0)
  FROM deliveries d
 WHERE d.tenant_id = ANY (ARRAY[$4::text, '']) AND d.topic = $1 AND d.partition = $2 AND d."offset" = $3;
