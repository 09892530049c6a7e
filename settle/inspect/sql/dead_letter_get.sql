-- name: DeadLetterGet :one
SELECT d.id, d.tenant_id, d.topic, d.partition, d."offset", d.key, d.value, d.headers, d.reason, d.error_class, d.error,
       d.attempts, d.at,
       (SELECT count(*) FROM dead_letter_replays r WHERE r.tenant_id = d.tenant_id AND r.dead_letter_id = d.id)::int AS replays
  FROM dead_letters d
 WHERE d.id = $1;
