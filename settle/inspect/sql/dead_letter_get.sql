-- name: DeadLetterGet :one
SELECT d.id, d.topic, d.partition, d."offset", d.key, d.value, d.headers, d.reason, d.error_class, d.error,
       d.attempts, d.at
  FROM dead_letters d
 WHERE d.id = $1;
