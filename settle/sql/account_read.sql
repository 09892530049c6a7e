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
