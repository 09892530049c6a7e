-- name: ReconcileDeliveryPastEnd :many
-- Delivery rows at or past the end offset of their partition (topics,
-- partitions, bounds: the end offsets): a delivery of no record on the
-- topic.
SELECT d.topic::text AS topic, d.partition::int AS partition, d."offset"::bigint AS "offset", d.outcome::text AS outcome
  FROM deliveries d
  JOIN unnest(@topics::text[], @partitions::int[], @bounds::bigint[]) AS c(topic, partition, bound)
    ON d.topic = c.topic AND d.partition = c.partition AND d."offset" >= c.bound
 ORDER BY 1, 2, 3
 LIMIT 10000;
