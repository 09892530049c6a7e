-- name: IdentityReserve :batchmany
-- Reserves n identity ids (settle_reserve, migration 0016: a block per
-- nextval) and reads the transaction's clock, so a batch can write all its
-- rows in one round trip.
SELECT r.id, now()::timestamptz AS now
  FROM unnest(settle_reserve(pg_get_serial_sequence('identities', 'id')::regclass, @n::integer)) AS r (id);
