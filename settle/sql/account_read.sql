-- name: AccountRead :many
-- Reads the cached state of the accounts a batch touches, locked by the
-- statement before it (account_lock.sql): by id the accounts this process
-- knows exist ($4), by key the others ($1..$3).
SELECT a.id, a.tenant_id, a.subject, a.currency, a.balance::text, a.held::text, a.seq, a.chain_head
  FROM accounts a
 WHERE a.id IN (SELECT unnest($4::bigint[])
                UNION
                SELECT x.id
                  FROM unnest($1::text[], $2::text[], $3::text[]) AS k (tenant_id, subject, currency)
                  JOIN accounts x ON x.tenant_id = k.tenant_id AND x.subject = k.subject AND x.currency = k.currency)
 ORDER BY a.id;
