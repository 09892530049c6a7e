-- name: DeadLetterMax :one
SELECT coalesce(max(id), 0) FROM dead_letters;
