-- name: DeadLetterMax :one
SELECT coalesce(max(id), 0)::bigint AS max_id FROM dead_letters;
