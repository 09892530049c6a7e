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
