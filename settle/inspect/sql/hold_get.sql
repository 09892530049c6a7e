-- name: HoldGet :one
-- A hold's state by its identity.
SELECT h.amount::text, h.remaining::text, h.status, h.expires_at, coalesce(h.closed_by, 0)
  FROM holds h
 WHERE h.identity_id = $1;
