-- name: IdempotencyInsertDone :exec
-- Inserts the Idempotency-Keys a settling transaction claimed, settled and
-- answered, done, with their answers: row i of the arrays is one key
-- (its id read by idempotency_lookup_many.sql), its canonicals the slice
-- canonicals[lo:hi] of the flat array, the identities its answer quotes
-- and where (migration 0020) the slices quote_identity[qlo:qhi] and
-- quote_at[qlo:qhi]. Written once: a key's row is never updated after it.
-- Its advisory lock is held, so no other transaction of this version
-- inserts it; one that did anyway (an earlier version, which claims
-- without the lock) makes this insert fail on the unique key and the
-- transaction retry. The keys inserted done were answered by one attempt,
-- the group's: one attempt id a statement, an InitPlan (gen_random_uuid
-- costs 3.5 µs a call here: SELECT count(gen_random_uuid()) FROM
-- generate_series(1, 100000) in psql).
INSERT INTO idempotency_keys (id, tenant_id, key, request_hash, canonicals, records, attempt_id, status,
                              lease_until, response_status, answer, answer_identities, answer_at, completed_at)
OVERRIDING SYSTEM VALUE
SELECT r.id, r.tenant_id, r.key, r.request_hash, (@canonicals::bytea[])[r.lo:r.hi], r.hi - r.lo + 1,
       (SELECT gen_random_uuid()), 'done', now(), r.status, r.answer,
       (@quote_identity::bigint[])[r.qlo:r.qhi], (@quote_at::int[])[r.qlo:r.qhi], now()
  FROM unnest(@id::bigint[], @tenant_id::text[], @key::text[], @request_hash::bytea[], @lo::int[], @hi::int[],
              @status::int[], @answer::bytea[], @qlo::int[], @qhi::int[])
       AS r(id, tenant_id, key, request_hash, lo, hi, status, answer, qlo, qhi);
