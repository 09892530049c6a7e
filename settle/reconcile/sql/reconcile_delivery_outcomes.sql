-- Delivery rows by outcome ($1: topic, '' = all), for the comparison with
-- what a known input must have produced.
SELECT d.outcome, count(*)
  FROM deliveries d
 WHERE ($1 = '' OR d.topic = $1)
 GROUP BY d.outcome
