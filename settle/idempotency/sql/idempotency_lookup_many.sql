-- name: IdempotencyLookupMany :batchmany
-- The existing Idempotency-Keys of a group, as idempotency_lookup.sql reads
-- one: ord is the key's ordinal in the arrays.
SELECT r.ord::bigint AS ord, k.id, k.request_hash, k.canonicals, k.status, k.attempt_id::text AS holder, k.attempts,
       greatest(0, ceil(extract(epoch FROM k.lease_until - now()) * 1000))::bigint AS lease_left_ms,
       coalesce(k.response_status, 0)::int AS response_status, k.response
  FROM unnest(@tenant_id::text[], @key::text[]) WITH ORDINALITY AS r(tenant_id, key, ord)
  JOIN idempotency_keys k ON k.tenant_id = r.tenant_id AND k.key = r.key;
