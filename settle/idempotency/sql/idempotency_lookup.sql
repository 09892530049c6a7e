-- name: IdempotencyLookup :one
-- An existing Idempotency-Key: its request, its claim and, when done, its
-- stored answer. lease_left_ms is measured by the database's clock, the
-- clock that takeover uses.
SELECT id, request_hash, canonicals, status, attempt_id::text AS holder, attempts,
       greatest(0, ceil(extract(epoch FROM lease_until - now()) * 1000))::bigint AS lease_left_ms,
       coalesce(response_status, 0)::int AS response_status, response
  FROM idempotency_keys
 WHERE tenant_id = @tenant_id AND key = @key;
