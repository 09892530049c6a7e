-- name: IdempotencyClaim :many
-- Claims an Idempotency-Key for one attempt: the database, not the caller,
-- decides who owns a key. Returns nothing when the key exists (the caller
-- reads it with idempotency_lookup.sql); never "select, then insert".
INSERT INTO idempotency_keys (tenant_id, key, request_hash, canonicals, records, attempt_id, lease_until)
VALUES ($1, $2, $3, $4, $5, $6, now() + $7::bigint * interval '1 millisecond')
    ON CONFLICT ON CONSTRAINT idempotency_keys_key DO NOTHING
RETURNING id;
