-- Offsets below each given bound ($1 topics, $2 partitions, $3 bounds:
-- PostgreSQL's next offset, or the end offset of a topic consumed to the
-- end) with no delivery row: a record passed over or lost. Counted from
-- offset 0: a record that left the topic before settle read it was lost
-- too.
SELECT c.topic, c.partition, o.o
  FROM unnest($1::text[], $2::int[], $3::bigint[]) AS c(topic, partition, bound)
 CROSS JOIN LATERAL generate_series(0::bigint, c.bound - 1) AS o(o)
EXCEPT
SELECT d.topic, d.partition, d."offset"
  FROM deliveries d
 ORDER BY 1, 2, 3
 LIMIT 10000
