-- Reserves identity ids (and reads the transaction's clock) so a batch can
-- write all its rows in one round trip.
SELECT nextval(pg_get_serial_sequence('identities', 'id')), now()
  FROM generate_series(1, $1::integer)
