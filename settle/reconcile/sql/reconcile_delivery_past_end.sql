-- Delivery rows at or past the end offset of their partition ($1 topics,
-- $2 partitions, $3 end offsets): a delivery of no record on the topic.
SELECT d.topic, d.partition, d."offset", d.outcome
  FROM deliveries d
  JOIN unnest($1::text[], $2::int[], $3::bigint[]) AS c(topic, partition, bound)
    ON d.topic = c.topic AND d.partition = c.partition AND d."offset" >= c.bound
 ORDER BY 1, 2, 3
 LIMIT 10000
