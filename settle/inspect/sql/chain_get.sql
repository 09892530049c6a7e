-- name: ChainGet :one
-- A chain's state by its root.
SELECT c.net_charge::text, c.version, coalesce(c.refund_id, 0), coalesce(c.refunded::text, ''),
       coalesce(c.reclaim_id, 0), c.recovered
  FROM chains c
 WHERE c.root_id = $1;
