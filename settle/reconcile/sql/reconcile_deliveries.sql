-- Delivery rows at the given coordinates ($1 topics, $2 partitions, $3
-- offsets), with the identity each names, and the identities of the tenant
-- and period compared ($4, $5) first seen at those coordinates: settle prune removes the delivery rows of closed
-- periods, and the identity (its topic, partition and offset) still shows
-- the record was handled.
SELECT d.topic, d.partition, d."offset", d.outcome, coalesce(d.identity_id, 0)
  FROM deliveries d
  JOIN unnest($1::text[], $2::int[], $3::bigint[]) AS c(topic, partition, "offset")
    ON d.tenant_id = ANY (ARRAY[$4::text, '']) AND d.topic = c.topic AND d.partition = c.partition AND d."offset" = c."offset"
 UNION ALL
SELECT i.topic, i.partition, i."offset", i.outcome, i.id
  FROM identities i
  JOIN unnest($1::text[], $2::int[], $3::bigint[]) AS c(topic, partition, "offset")
    ON i.topic = c.topic AND i.partition = c.partition AND i."offset" = c."offset"
 WHERE i.tenant_id = $4 AND i.account_period = $5
