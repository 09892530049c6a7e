-- name: ChainRoot :batchmany
-- The roots of chains that may have no chains row yet: a chain gets its row
-- when it is first adjusted or refunded; until then it is its root usage.
SELECT r.id, r.canonical, r.subject, r.currency, coalesce(r.settlement_id, ''), coalesce(r.account_id, 0)
  FROM identities r
 WHERE r.id = ANY (@root_ids::bigint[]);
