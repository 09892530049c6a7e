-- Locks the accounts a batch touches, in id order (every transaction locks
-- in that one order), and reads their cached state.
SELECT a.id, a.tenant_id, a.subject, a.currency, a.balance::text, a.held::text, a.seq, a.chain_head
  FROM accounts a
  JOIN unnest($1::text[], $2::text[], $3::text[]) AS k (tenant_id, subject, currency)
    ON a.tenant_id = k.tenant_id AND a.subject = k.subject AND a.currency = k.currency
 ORDER BY a.id
   FOR UPDATE OF a
