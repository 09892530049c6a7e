-- name: IdempotencyClaimMany :many
-- Claims a group's Idempotency-Keys in one statement (one transaction):
-- row i of the arrays is one key, its canonicals the slice
-- canonicals[lo:hi] of the flat array. Returns the ordinal and id of every
-- key this statement inserted; a key that exists returns nothing (the
-- caller reads it with idempotency_lookup_many.sql). The caller sends each
-- key at most once, sorted, so concurrent groups take the keys' index
-- entries in one order.
INSERT INTO idempotency_keys (tenant_id, key, request_hash, canonicals, records, attempt_id, lease_until)
SELECT r.tenant_id, r.key, r.request_hash, ($4::bytea[])[r.lo:r.hi], r.hi - r.lo + 1, r.attempt_id,
       now() + r.lease_ms * interval '1 millisecond'
  FROM unnest($1::text[], $2::text[], $3::bytea[], $5::int[], $6::int[], $7::uuid[], $8::bigint[])
       WITH ORDINALITY AS r(tenant_id, key, request_hash, lo, hi, attempt_id, lease_ms, ord)
 ORDER BY r.ord
    ON CONFLICT ON CONSTRAINT idempotency_keys_key DO NOTHING
RETURNING id, tenant_id, key;
