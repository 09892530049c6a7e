-- name: AccountInsert :batchexec
-- Creates the accounts a batch touches that do not exist yet. Sorted, so
-- concurrent batches insert in one order and cannot deadlock on the keys.
INSERT INTO accounts (tenant_id, subject, currency)
SELECT k.tenant_id, k.subject, k.currency
  FROM unnest(@tenant_id::text[], @subject::text[], @currency::text[]) AS k (tenant_id, subject, currency)
 ORDER BY 1, 2, 3
    ON CONFLICT ON CONSTRAINT accounts_key DO NOTHING;

-- name: AccountKept :exec
-- Fails (40001: retry, reading them fresh) when an account whose kept
-- state the transaction used is gone, or, where @newest, has a newer row
-- than @entry_ids (settle_kept, migration 0017).
SELECT settle_kept(@tenant_ids::text[], @ids::bigint[], @entry_ids::bigint[], @newest::boolean[]);

-- name: AccountLock :batchexec
-- Serialises the transactions that write the accounts a batch touches: an
-- advisory lock per account, taken in id order (every transaction locks in
-- that one order), before their state is read (account_read.sql, the next
-- statement, so its snapshot comes after every writer the lock waited
-- for). By id the accounts this process knows exist (@ids), by key the
-- others (@tenant_id..@currency). An advisory lock lives in shared memory: unlike
-- SELECT ... FOR UPDATE it writes no WAL record and dirties no page per
-- account. The class 2 + (id >> 31) keeps account locks apart from the
-- period slices (1<<16 up) and the relay's single-key lock.
SELECT pg_advisory_xact_lock(2 + (s.id >> 31)::int, (s.id & 2147483647)::int)
  FROM (SELECT u.id
          FROM (SELECT unnest(@ids::bigint[]) AS id
                UNION
                SELECT x.id
                  FROM unnest(@tenant_id::text[], @subject::text[], @currency::text[]) AS k (tenant_id, subject, currency)
                  JOIN accounts x ON x.tenant_id = k.tenant_id AND x.subject = k.subject AND x.currency = k.currency) u
         ORDER BY u.id) s;

-- name: AccountRead :batchmany
-- Reads the state of the accounts a batch touches (account_states: each
-- account's newest ledger row), locked by the statement before it
-- (account_lock.sql): by id the accounts this process knows exist (@ids),
-- by key the others (@tenant_id..@currency).
SELECT a.id, a.tenant_id, a.subject, a.currency, a.balance::text AS balance, a.held::text AS held, a.seq, a.chain_head, a.entry_id
  FROM account_states a
 WHERE a.id IN (SELECT unnest(@ids::bigint[])
                UNION
                SELECT x.id
                  FROM unnest(@tenant_id::text[], @subject::text[], @currency::text[]) AS k (tenant_id, subject, currency)
                  JOIN accounts x ON x.tenant_id = k.tenant_id AND x.subject = k.subject AND x.currency = k.currency)
 ORDER BY a.id;
