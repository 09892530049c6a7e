-- settle schema, version 17: a ledger row's id counts within its account,
-- and the primary key fences the account's writers.
--
-- An account's state is its newest ledger row (migration 0016). Its
-- writers were serialised by an advisory lock per account, taken and then
-- checked by every settling transaction, and the row ids came from one
-- sequence for all accounts. Now the writer gives each row its id: the
-- id of the account's newest row + 1 (the state it read or kept carries
-- that id, account_states.entry_id below). Two writers that start from the
-- same state write the same primary key (tenant_id, account_id, id), and
-- the second is refused (unique violation: it retries from a fresh read);
-- a writer that starts from an older state collides with a row already
-- written after it, since every row after this version is the previous
-- + 1. So an account's rows stay one gapless line, each written from the
-- state of the one before, without a lock and without an index of its
-- own: that is what lets a process keep the state of the accounts it
-- writes between its transactions and append to them with no read and no
-- lock (settle/accounts.go). Transactions that read an account's state
-- fresh still take its advisory lock first (account_lock.sql), so that
-- writers of a contended account wait for each other instead of retrying;
-- the check that no other transaction holds it (settle_locked) goes.
--
-- Rows written before this version keep their ids, drawn from the one
-- sequence: each account's next row is its newest + 1, above them.
-- Ids order rows within an account, which is all that account_states and
-- the readers that order rows use (per account, or per identity: a
-- settlement's rows are on one account).
--
-- Outbox ids keep per-account order without the lock: a writer draws them
-- after it learnt the state it starts from, that is after the commit of
-- the account's previous writer, whose ids were drawn before it.
ALTER TABLE ledger_entries ALTER COLUMN id DROP IDENTITY;

DROP FUNCTION settle_locked(text, bigint[]);

-- account_states as in migration 0016, with the id of the row that
-- carries the state (0 for an account without one): its next row's id is
-- entry_id + 1.
CREATE OR REPLACE VIEW account_states AS
SELECT a.id, a.tenant_id, a.subject, a.currency,
       coalesce(s.balance_after, 0) AS balance, coalesce(s.held_after, 0) AS held,
       coalesce(s.seq, 0) AS seq, coalesce(s.chain_hash, ''::bytea) AS chain_head,
       a.created_at, coalesce(s.created_at, a.created_at) AS updated_at,
       coalesce(s.id, 0) AS entry_id
  FROM accounts a
  LEFT JOIN LATERAL (SELECT e.id, e.balance_after, e.held_after, e.seq, e.chain_hash, e.created_at
                       FROM ledger_entries e
                      WHERE e.tenant_id = a.tenant_id AND e.account_id = a.id AND e.seq IS NOT NULL
                      ORDER BY e.id DESC
                      LIMIT 1) s ON true;

-- settle_kept checks, before a transaction that used kept account states
-- commits, what no primary key fences: that every kept state's newest row
-- (tenant_ids[i], ids[i], entry_ids[i]) is still there — a database
-- restored from an older backup or emptied under a running process has
-- lost it — and, where newest[i], that the account has no newer row: an
-- answer from a kept state that writes no row to the account (a hold
-- refused for want of funds, a release of nothing) must come from its
-- newest state. (A process keeps no state of an account without rows.)
-- 40001, as a serialization failure: the transaction retries, reading those
-- accounts fresh. A primary-key probe per state, and one more per state
-- an answer used.
CREATE FUNCTION settle_kept(tenant_ids text[], ids bigint[], entry_ids bigint[], newest boolean[]) RETURNS void
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    n bigint;
BEGIN
    SELECT count(*) INTO n
      FROM unnest(tenant_ids, ids, entry_ids) AS k (tenant_id, id, entry_id)
     WHERE NOT EXISTS (SELECT 1 FROM ledger_entries e WHERE e.tenant_id = k.tenant_id AND e.account_id = k.id AND e.id = k.entry_id);
    IF n > 0 THEN
        RAISE EXCEPTION 'settle_kept: % of % accounts this process kept are gone from the database', n, cardinality(ids)
            USING ERRCODE = 'serialization_failure',
                  HINT = 'the database was restored or emptied under the process: it forgets what it knew and reads again';
    END IF;
    IF true = ANY (newest) THEN
        SELECT count(*) INTO n
          FROM unnest(tenant_ids, ids, entry_ids, newest) AS k (tenant_id, id, entry_id, newest)
         WHERE k.newest AND EXISTS (SELECT 1 FROM ledger_entries e
                                     WHERE e.tenant_id = k.tenant_id AND e.account_id = k.id AND e.id > k.entry_id);
        IF n > 0 THEN
            RAISE EXCEPTION 'settle_kept: % of % accounts changed since this process kept their state', n, cardinality(ids)
                USING ERRCODE = 'serialization_failure';
        END IF;
    END IF;
END $$;
REVOKE ALL ON FUNCTION settle_kept(text[], bigint[], bigint[], boolean[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION settle_kept(text[], bigint[], bigint[], boolean[]) TO settle_app;
