-- name: IdentityReserve :batchmany
-- Reserves n identity ids (and reads the transaction's clock) so a
-- batch can write all its rows in one round trip. The sequence steps by a
-- block (migration 0003): one nextval v reserves v .. v+step-1; the rest of
-- the last block is left unused (ids have gaps).
WITH s AS (
    SELECT seqincrement AS step
      FROM pg_sequence
     WHERE seqrelid = pg_get_serial_sequence('identities', 'id')::regclass
)
SELECT (b.v + o.i)::bigint AS id, now()::timestamptz AS now
  FROM s
 CROSS JOIN LATERAL (SELECT nextval(pg_get_serial_sequence('identities', 'id')) AS v
                       FROM generate_series(1, ceil((@n::integer)::numeric / s.step)::integer)) AS b
 CROSS JOIN LATERAL generate_series(0, s.step - 1) AS o (i)
 LIMIT @n::integer;
