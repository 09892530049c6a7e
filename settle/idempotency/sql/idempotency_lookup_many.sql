-- name: IdempotencyLookupMany :batchmany
-- The Idempotency-Keys of a group, read after their locks
-- (idempotency_lock_many.sql): ord is the key's ordinal in the arrays;
-- found says whether it exists. A key that does not gets its id from the
-- table's sequence, so that its records' coordinates (HTTPOffset) are
-- known before they settle. The sequence is named as a constant, which
-- the statement resolves once when it is prepared: looked up by
-- pg_get_serial_sequence, a catalog scan, it cost 25-40 µs a statement
-- (pgbench -M prepared of nextval(pg_get_serial_sequence(...)) against
-- nextval('idempotency_keys_id_seq'), alternating). Both layouts
-- (settle/schema/partition.sql) and Citus keep the name PostgreSQL gives
-- an identity column's sequence, <table>_id_seq. Its row is inserted with its
-- answer (idempotency_insert_done.sql). lease_left_ms is measured by the
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
