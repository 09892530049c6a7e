-- name: DeliveryGet :many
-- The delivery row of one input record: the tenant's, or one written
-- without a tenant.
SELECT d.topic, d.partition, d."offset", d.outcome, d.reason, d.error, d.at, coalesce(d.identity_id, 0) AS identity_id,
       coalesce(d.case_id, 0) AS case_id
  FROM deliveries d
 WHERE d.tenant_id = ANY (ARRAY[sqlc.arg(tenant_id)::text, '']) AND d.topic = sqlc.arg(topic)
   AND d.partition = sqlc.arg(partition) AND d."offset" = sqlc.arg('offset');
