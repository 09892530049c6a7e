-- Delivery rows at the given coordinates ($1 topics, $2 partitions, $3
-- offsets), with the identity each names.
SELECT d.topic, d.partition, d."offset", d.outcome, coalesce(d.identity_id, 0)
  FROM deliveries d
  JOIN unnest($1::text[], $2::int[], $3::bigint[]) AS c(topic, partition, "offset")
    ON d.topic = c.topic AND d.partition = c.partition AND d."offset" = c."offset"
