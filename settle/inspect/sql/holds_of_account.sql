-- name: HoldsOfAccount :many
SELECT i.account_period, i.record_id, h.amount::text AS amount, h.remaining::text AS remaining, h.expires_at, h.status
  FROM holds h JOIN identities i ON i.tenant_id = h.tenant_id AND i.id = h.identity_id
 WHERE h.account_id = $1 AND h.status = 'active'
 ORDER BY h.identity_id;
