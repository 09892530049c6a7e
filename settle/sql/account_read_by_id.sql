-- name: AccountReadByID :batchmany
-- Reads accounts by id (accounts reached through a chain or a hold) with
-- their state (account_states), locked by the statement before it
-- (account_lock.sql).
SELECT a.id, a.tenant_id, a.subject, a.currency, a.balance::text AS balance, a.held::text AS held, a.seq, a.chain_head, a.entry_id
  FROM unnest(@id::bigint[]) AS k (id)
  JOIN account_states a ON a.id = k.id
 ORDER BY a.id;
