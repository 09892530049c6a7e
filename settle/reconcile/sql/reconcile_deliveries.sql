-- name: ReconcileDeliveries :many
-- Delivery rows at the given coordinates (topics, partitions, offsets),
-- with the identity each names, and the identities of the tenant and
-- period compared (tenant_id, period) first seen at those coordinates:
-- settle prune removes the delivery rows of closed periods, and the
-- identity (its topic, partition and offset) still shows the record was
-- handled.
SELECT d.topic::text AS topic, d.partition::int AS partition, d."offset"::bigint AS "offset", d.outcome::text AS outcome,
       coalesce(d.identity_id, 0)::bigint AS identity_id
  FROM deliveries d
  JOIN unnest(@topics::text[], @partitions::int[], @offsets::bigint[]) AS c(topic, partition, "offset")
    ON d.tenant_id = ANY (ARRAY[@tenant_id::text, '']) AND d.topic = c.topic AND d.partition = c.partition AND d."offset" = c."offset"
 UNION ALL
SELECT i.topic, i.partition, i."offset", i.outcome, i.id
  FROM identities i
  JOIN unnest(@topics::text[], @partitions::int[], @offsets::bigint[]) AS c(topic, partition, "offset")
    ON i.topic = c.topic AND i.partition = c.partition AND i."offset" = c."offset"
 WHERE i.tenant_id = @tenant_id AND i.account_period = @period;
