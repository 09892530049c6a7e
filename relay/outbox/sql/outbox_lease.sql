-- name: OutboxLeaseTry :one
-- Takes the outbox relay's leadership without waiting: a session-level
-- advisory lock, held for as long as this connection lives.
SELECT pg_try_advisory_lock(@key::bigint) AS held;
