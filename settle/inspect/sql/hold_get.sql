-- name: HoldGet :one
-- A hold's state by its identity.
SELECT h.amount::text AS amount, h.remaining::text AS remaining, h.status, h.expires_at, coalesce(h.closed_by, 0) AS closed_by
  FROM holds h
 WHERE h.identity_id = $1;
