-- name: ChainGet :one
-- A chain's state by its root.
SELECT c.net_charge::text AS net_charge, c.version, coalesce(c.refund_id, 0) AS refund_id,
       coalesce(c.refunded::text, '')::text AS refunded, coalesce(c.reclaim_id, 0) AS reclaim_id, c.recovered
  FROM chains c
 WHERE c.root_id = $1;
