-- name: IdempotencyClaimMany :batchmany
-- Claims a group's Idempotency-Keys in one statement (one transaction):
-- row i of the arrays is one key, its canonicals the slice
-- canonicals[lo:hi] of the flat array. Returns the id, tenant and key of
-- every key this statement inserted; a key that exists returns nothing (the
-- caller reads it with idempotency_lookup_many.sql). The caller sends each
-- key at most once, sorted, so concurrent groups take the keys' index
-- entries in one order.
INSERT INTO idempotency_keys (tenant_id, key, request_hash, canonicals, records, attempt_id, lease_until)
SELECT r.tenant_id, r.key, r.request_hash, (@canonicals::bytea[])[r.lo:r.hi], r.hi - r.lo + 1, r.attempt_id,
       now() + r.lease_ms * interval '1 millisecond'
  FROM unnest(@tenant_id::text[], @key::text[], @request_hash::bytea[], @lo::int[], @hi::int[],
              (@attempt_id::text[])::uuid[], @lease_ms::bigint[])
       WITH ORDINALITY AS r(tenant_id, key, request_hash, lo, hi, attempt_id, lease_ms, ord)
 ORDER BY r.ord
    ON CONFLICT ON CONSTRAINT idempotency_keys_key DO NOTHING
RETURNING id, tenant_id, key;
