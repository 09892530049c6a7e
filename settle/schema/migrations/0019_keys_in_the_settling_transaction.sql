-- settle schema, version 19: an Idempotency-Key is claimed, settled and
-- answered in one transaction.
--
-- The HTTP edge claimed a group's keys in a transaction of their own (a
-- row per key, in progress under a lease), settled their records in a
-- second, and stored the answers in a third by a fenced update. Now the
-- settling transaction takes each key's advisory lock (a concurrent
-- request with the same key is answered busy, without waiting), reads the
-- key, and inserts it done with its answer in the commit that settles its
-- records: one row written once per key. A new key's id, which its
-- records' coordinates are made of, comes from the table's sequence before
-- the row is inserted (idempotency_lookup_many.sql), which needs USAGE on
-- the sequence. Keys an earlier version left in progress are taken over
-- as before, once their lease ends.
DO $$
BEGIN
    EXECUTE format('GRANT USAGE ON SEQUENCE %s TO settle_app', pg_get_serial_sequence('idempotency_keys', 'id'));
END $$;
