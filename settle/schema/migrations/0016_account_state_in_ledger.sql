-- settle schema, version 16: an account's state is its newest ledger row.
--
-- An account row held, beside its key, a cache of its state: balance,
-- held, the sequence of its last settlement and the hash of its newest
-- ledger row. Every batch that moved an account rewrote that row (≈ 115 B
-- of WAL per record, and an update statement per batch), although every
-- settlement already appends a ledger row to the account, under the
-- account's lock, as the account's newest row. That row now carries the
-- state after it: seq (the sequence of the settlement that wrote it),
-- balance_after and held_after; its chain_hash is the chain's head. The
-- account row is its key alone, written once. The newest row is the one
-- with the highest id: ledger ids are drawn one at a time (the sequence
-- caches none) as the rows are written, and an account's writers take
-- turns under its lock, so a later writer's ids are above an earlier's.
--
-- account_states shows each account with its state, as accounts did:
-- the newest row that carries one (rows written before this version
-- carry none, except each account's newest, filled in below from the
-- account's cache; a row written by hand carries none either, so the
-- state does not follow it, as the cache did not). An account without
-- such a row is at zero.
--
-- The writers of an account are serialised by its advisory lock
-- (account_lock.sql), as before; the update's guard on the sequence it
-- had read goes with the update. In its place the settling transaction
-- checks, before its COMMIT, that no other transaction holds the lock of
-- an account it writes rows to (settle_locked below,
-- account_locks_held.sql).
ALTER TABLE ledger_entries ADD COLUMN seq bigint,
                           ADD COLUMN balance_after numeric,
                           ADD COLUMN held_after numeric,
                           ADD CONSTRAINT ledger_entries_held_after_nonnegative CHECK (held_after >= 0);

-- Ledger rows are append-only (their trigger stops the owner too); this
-- is the one rewrite of them, in the migration's transaction.
ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_append_only;
UPDATE ledger_entries e
   SET seq = a.seq, balance_after = a.balance, held_after = a.held
  FROM accounts a
  JOIN LATERAL (SELECT max(n.id) AS id FROM ledger_entries n
                 WHERE n.tenant_id = a.tenant_id AND n.account_id = a.id) newest ON true
 WHERE e.tenant_id = a.tenant_id AND e.account_id = a.id AND e.id = newest.id;
ALTER TABLE ledger_entries ENABLE TRIGGER ledger_entries_append_only;

ALTER TABLE accounts DROP COLUMN balance, DROP COLUMN held, DROP COLUMN seq,
                     DROP COLUMN chain_head, DROP COLUMN updated_at;
REVOKE UPDATE ON accounts FROM settle_app;

-- Account rows are no longer rewritten: pages full again (0008 left them
-- half empty for the updates to stay on their page). A partitioned
-- table keeps its partitions' setting.
DO $$
BEGIN
    IF (SELECT relkind FROM pg_class WHERE oid = 'accounts'::regclass) = 'r' THEN
        ALTER TABLE accounts RESET (fillfactor);
    END IF;
END $$;

CREATE VIEW account_states AS
SELECT a.id, a.tenant_id, a.subject, a.currency,
       coalesce(s.balance_after, 0) AS balance, coalesce(s.held_after, 0) AS held,
       coalesce(s.seq, 0) AS seq, coalesce(s.chain_hash, ''::bytea) AS chain_head,
       a.created_at, coalesce(s.created_at, a.created_at) AS updated_at
  FROM accounts a
  LEFT JOIN LATERAL (SELECT e.balance_after, e.held_after, e.seq, e.chain_hash, e.created_at
                       FROM ledger_entries e
                      WHERE e.tenant_id = a.tenant_id AND e.account_id = a.id AND e.seq IS NOT NULL
                      ORDER BY e.id DESC
                      LIMIT 1) s ON true;
GRANT SELECT ON account_states TO settle_app, settle_reader;

-- settle_locked fails when another transaction holds the advisory lock
-- (account_lock.sql's keys) of an account in ids: it is then writing the
-- account beside this one, which would append rows from the same state.
-- For a lock this transaction holds, pg_try_advisory_xact_lock returns
-- true at once (the lock is re-entrant); for a free one it takes it.
CREATE FUNCTION settle_locked(statement text, ids bigint[]) RETURNS void
    LANGUAGE plpgsql AS $$
DECLARE
    taken bigint;
BEGIN
    SELECT count(*) INTO taken
      FROM unnest(ids) AS k (id)
     WHERE NOT pg_try_advisory_xact_lock(2 + (k.id >> 31)::int, (k.id & 2147483647)::int);
    IF taken > 0 THEN
        RAISE EXCEPTION '%: % of the % accounts this transaction writes are locked by another', statement, taken, cardinality(ids)
            USING ERRCODE = 'data_exception',
                  HINT = 'an account''s rows were written without its lock: a defect of the locking; report it';
    END IF;
END $$;
REVOKE ALL ON FUNCTION settle_locked(text, bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION settle_locked(text, bigint[]) TO settle_app;

-- settle_reserve reserves n ids of a sequence that steps by a block (the
-- identities' since migration 0003, the outbox's since 0015) and returns
-- them in order: one nextval v per block reserves v .. v+step-1, and the
-- rest of the last block is left unused (ids have gaps).
-- identity_reserve.sql and outbox_settlements_insert.sql take their ids
-- from it. An array, built block by block: a set sorted into order, or
-- joined back to its callers' rows by position, cost ten times the
-- statements it serves (BENCHMARKS.md, "Tried and not kept").
CREATE FUNCTION settle_reserve(seq regclass, n integer) RETURNS bigint[]
    LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    step integer;
    v bigint;
    ids bigint[] := '{}';
BEGIN
    SELECT q.seqincrement INTO step FROM pg_sequence q WHERE q.seqrelid = seq;
    WHILE cardinality(ids) < n LOOP
        v := nextval(seq);
        ids := ids || ARRAY(SELECT v + i FROM generate_series(0, least(step, n - cardinality(ids)) - 1) AS i);
    END LOOP;
    RETURN ids;
END $$;
REVOKE ALL ON FUNCTION settle_reserve(regclass, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION settle_reserve(regclass, integer) TO settle_app;
