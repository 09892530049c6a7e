-- name: IdentityByRoot :many
-- The members of a chain other than its root (identities_root).
SELECT i.id
  FROM identities i
 WHERE i.root_id = sqlc.arg(root_id)::bigint AND i.operation IN ('correction', 'reversal', 'resolution')
 ORDER BY i.id
 LIMIT sqlc.arg(members_max);
