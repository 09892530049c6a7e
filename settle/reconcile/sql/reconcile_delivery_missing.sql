-- name: ReconcileDeliveryMissing :many
-- Offsets below each given bound (topics, partitions, bounds: PostgreSQL's
-- next offset, or the end offset of a topic consumed to the end) with no
-- delivery row: a record passed over or lost. Counted from offset 0: a
-- record that left the topic before settle read it was lost too.
SELECT c.topic::text AS topic, c.partition::int AS partition, o.o::bigint AS "offset"
  FROM unnest(@topics::text[], @partitions::int[], @bounds::bigint[]) AS c(topic, partition, bound)
 CROSS JOIN LATERAL generate_series(0::bigint, c.bound - 1) AS o(o)
EXCEPT
SELECT d.topic, d.partition, d."offset"
  FROM deliveries d
 ORDER BY 1, 2, 3
 LIMIT 10000;
