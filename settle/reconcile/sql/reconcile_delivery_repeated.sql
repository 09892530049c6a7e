-- name: ReconcileDeliveryRepeated :many
-- Input coordinates with more than one delivery row: every record read
-- from a topic is delivered once (its offset moves in the same
-- transaction), a repeat of its content has coordinates of its own.
SELECT d.topic::text AS topic, d.partition::int AS partition, d."offset"::bigint AS "offset", count(*) AS deliveries,
       string_agg(d.outcome, ',' ORDER BY d.outcome)::text AS outcomes
  FROM deliveries d
 GROUP BY d.topic, d.partition, d."offset"
HAVING count(*) > 1
 ORDER BY 1, 2, 3
 LIMIT 10000;
