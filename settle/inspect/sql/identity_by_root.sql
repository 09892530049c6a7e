-- name: IdentityByRoot :many
-- The members of a chain other than its root (identities_root).
SELECT i.id
  FROM identities i
 WHERE i.root_id = $1 AND i.operation IN ('correction', 'reversal', 'resolution')
 ORDER BY i.id
 LIMIT $2;
