-- name: HoldDue :many
-- Active holds past their expiry, a page at a time, with their accounts.
SELECT h.identity_id, h.account_id
  FROM holds h
 WHERE h.status = 'active' AND h.expires_at <= now()
 ORDER BY h.expires_at
 LIMIT @max_rows::integer;
