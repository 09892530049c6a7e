-- Locks accounts by id (accounts reached through a chain or a hold).
SELECT a.id, a.tenant_id, a.subject, a.currency, a.balance::text, a.held::text, a.seq, a.chain_head
  FROM accounts a
 WHERE a.id = ANY ($1::bigint[])
 ORDER BY a.id
   FOR UPDATE OF a
