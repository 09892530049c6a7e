-- name: Now :one
-- The transaction's clock.
SELECT now()::timestamptz AS now;
