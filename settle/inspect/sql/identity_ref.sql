-- name: IdentityRef :many
-- Short references to identities, for links.
SELECT i.id, i.account_period, i.record_id, i.operation, i.outcome, coalesce(i.settlement_id, '') AS settlement_id
  FROM identities i
 WHERE i.id = ANY (sqlc.arg(ids)::bigint[]);
