-- name: DeadLetterList :many
-- One page of dead letters, oldest first, keyset-paged on id. $1 = '' means
-- any reason ($5 any topic, $6 any error class); $3 caps the ids read (a replay reads what existed when it
-- started, not the dead letters it causes).
SELECT d.id, d.topic, d.partition, d."offset", d.key, d.value, d.headers, d.reason, d.error_class, d.error,
       d.attempts, d.at
  FROM dead_letters d
 WHERE ($1::text = '' OR d.reason = $1)
   AND ($5::text = '' OR d.topic = $5)
   AND ($6::text = '' OR d.error_class = $6)
   AND d.id > $2 AND d.id <= $3
 ORDER BY d.id
 LIMIT $4;
