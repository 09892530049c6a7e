-- name: Progress :one
-- How far a running pipeline has got, cheaply enough to poll: delivery
-- rows, and outbox rows the relay has not published.
SELECT (SELECT count(*) FROM deliveries) AS deliveries, (SELECT coalesce(sum(cardinality(ids)), 0) FROM outbox_queue)::bigint AS unpublished;
