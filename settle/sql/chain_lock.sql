-- Locks chains by root and reads their state with the root's account.
SELECT c.root_id, c.account_id, c.net_charge::text, c.version, coalesce(c.refund_id, 0),
       coalesce(c.refunded::text, ''), coalesce(c.reclaim_id, 0), c.recovered, c.rev,
       r.subject, r.currency, coalesce(r.settlement_id, ''), coalesce(f.settlement_id, '')
  FROM chains c
  JOIN identities r ON r.id = c.root_id
  LEFT JOIN identities f ON f.id = c.refund_id
 WHERE c.root_id = ANY ($1::bigint[])
 ORDER BY c.root_id
   FOR UPDATE OF c
