-- name: IdempotencyLookupMany :batchmany
-- The Idempotency-Keys of a group, read after their locks
-- (idempotency_keys.sql's IdempotencyLockMany): ord is the key's ordinal in the arrays;
-- found says whether it exists. A key that does not gets its id from the
-- table's sequence, so that its records' coordinates (HTTPOffset) are
-- known before they settle. The sequence is named as a constant, which
-- the statement resolves once when it is prepared: looked up by
-- pg_get_serial_sequence, a catalog scan, it cost 25-40 µs a statement
-- (pgbench -M prepared of nextval(pg_get_serial_sequence(...)) against
-- nextval('idempotency_keys_id_seq'), alternating). Both layouts
-- (settle/schema/partition.sql) and Citus keep the name PostgreSQL gives
-- an identity column's sequence, <table>_id_seq. Its row is inserted with its
-- answer (idempotency_keys.sql's IdempotencyInsertDone). lease_left_ms is measured by the
-- database's clock: only keys claimed by an earlier version of settle are
-- in progress. A done key's answer is put back together from the
-- identities it quotes (settle_key_answer, migration 0020), called only
-- for a key that quotes one: a PL/pgSQL call for each of a group's new
-- keys cost ≈ 2 µs a key (docs/experiments/key-answer-call.bash in the tree of aba77c0: pgbench
-- -M prepared of this statement over ten absent keys with the call bare
-- and with this CASE, alternating: 0.152 and 0.145 ms against 0.127 and
-- 0.126; 0.145-0.158 against 0.127-0.136 on a later host).
SELECT r.ord::bigint AS ord, (k.id IS NOT NULL)::boolean AS found,
       coalesce(k.id, nextval('idempotency_keys_id_seq'::regclass))::bigint AS id,
       coalesce(k.request_hash, ''::bytea)::bytea AS request_hash, coalesce(k.canonicals, '{}')::bytea[] AS canonicals,
       coalesce(k.status, '')::text AS status, coalesce(k.attempt_id::text, '')::text AS holder,
       coalesce(k.attempts, 0)::int AS attempts,
       coalesce(greatest(0, ceil(extract(epoch FROM k.lease_until - now()) * 1000)), 0)::bigint AS lease_left_ms,
       coalesce(k.response_status, 0)::int AS response_status,
       (CASE WHEN k.answer_identities <> '{}' THEN settle_key_answer(k.tenant_id, k.answer, k.answer_identities, k.answer_at)
             ELSE k.answer END)::bytea AS response
  FROM unnest(@tenant_id::text[], @key::text[]) WITH ORDINALITY AS r(tenant_id, key, ord)
  LEFT JOIN idempotency_keys k ON k.tenant_id = r.tenant_id AND k.key = r.key
 ORDER BY r.ord;

-- name: IdempotencyLockMany :batchmany
-- Takes the advisory lock of each Idempotency-Key of a group for the
-- settling transaction that claims, settles and answers it, without
-- waiting: locked is false for a key another transaction holds (its
-- request is answered busy). The lock is (class, hash) of the key
-- (idempotency.lockOf): its class is negative, apart from every other
-- lock of the schema. The next statement reads the keys, so its snapshot
-- comes after every transaction that held one of these locks committed.
SELECT r.ord::bigint AS ord, pg_try_advisory_xact_lock(r.class, r.hash) AS locked
  FROM unnest(@class::int[], @hash::int[]) WITH ORDINALITY AS r(class, hash, ord);

-- name: IdempotencyTakeoverMany :batchmany
-- Takes over keys an earlier version of settle left in progress past their
-- lease (its attempt crashed or stalled): swaps in this attempt's id only
-- where the claim is still the expired one that was read (holder), and
-- holds the rows until the transaction that settles and answers them
-- commits. Returns the ids taken over; a key missing from them moved
-- meanwhile.
UPDATE idempotency_keys AS k
   SET attempt_id  = r.attempt_id,
       attempts    = k.attempts + 1,
       lease_until = now()
  FROM unnest(@id::bigint[], (@holder::text[])::uuid[], (@attempt_id::text[])::uuid[]) AS r(id, holder, attempt_id)
 WHERE k.id = r.id
   AND k.attempt_id = r.holder
   AND k.status = 'in_progress'
   AND k.lease_until <= now()
RETURNING k.id;

-- name: IdempotencyInsertDone :exec
-- Inserts the Idempotency-Keys a settling transaction claimed, settled and
-- answered, done, with their answers: row i of the arrays is one key
-- (its id read by idempotency_keys.sql's IdempotencyLookupMany), its canonicals the slice
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

-- name: IdempotencyCompleteMany :exec
-- Stores the answers of keys taken over by idempotency_keys.sql's IdempotencyTakeoverMany
-- in the same transaction, which holds their rows: each where this
-- attempt owns the claim, the identities its answer quotes and where the
-- slices quote_identity[qlo:qhi] and quote_at[qlo:qhi] of the flat arrays
-- (as idempotency_keys.sql's IdempotencyInsertDone).
UPDATE idempotency_keys AS k
   SET status            = 'done',
       response_status   = r.status,
       answer            = r.answer,
       answer_identities = (@quote_identity::bigint[])[r.qlo:r.qhi],
       answer_at         = (@quote_at::int[])[r.qlo:r.qhi],
       completed_at      = now()
  FROM unnest(@id::bigint[], (@attempt_id::text[])::uuid[], @status::int[], @answer::bytea[], @qlo::int[], @qhi::int[])
       AS r(id, attempt_id, status, answer, qlo, qhi)
 WHERE k.id = r.id
   AND k.attempt_id = r.attempt_id
   AND k.status = 'in_progress';
