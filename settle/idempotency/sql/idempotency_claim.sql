-- name: IdempotencyClaim :one
-- Claims an Idempotency-Key for one attempt: the database, not the caller,
-- decides who owns a key. Returns no row when the key exists (the caller
-- reads it with idempotency_lookup.sql); never "select, then insert".
-- (sqlc.arg: after "+", @lease_ms would read as the prefix operator @.)
INSERT INTO idempotency_keys (tenant_id, key, request_hash, canonicals, records, attempt_id, lease_until)
VALUES (@tenant_id, @key, @request_hash, @canonicals, @records, (@attempt_id::text)::uuid,
        now() + sqlc.arg(lease_ms)::bigint * interval '1 millisecond')
    ON CONFLICT ON CONSTRAINT idempotency_keys_key DO NOTHING
RETURNING id;
