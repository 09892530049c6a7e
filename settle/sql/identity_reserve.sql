-- name: IdentityReserve :batchmany
-- Reserves @blocks blocks of identity ids and reads the transaction's
-- clock, so a batch can write all its rows in one round trip. The
-- identities' sequence steps by a block (db.IDBlock, migration 0003): one
-- nextval v reserves v .. v+IDBlock-1 (db.Reserved spreads them); the
-- rest of the last block is left unused (ids have gaps). The sequence is
-- named as a constant (edge/idempotency/sql/idempotency_keys.sql's IdempotencyLookupMany).
SELECT nextval('identities_id_seq'::regclass) AS v, now()::timestamptz AS now
  FROM generate_series(1, @blocks::integer);
