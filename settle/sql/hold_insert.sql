-- name: HoldInsert :exec
-- The holds a batch opened; expires_at as text, '' for a hold that never expires.
INSERT INTO holds (identity_id, tenant_id, account_id, amount, remaining, expires_at, status, closed_by)
SELECT k.identity_id, k.tenant_id, k.account_id, k.amount, k.remaining, nullif(k.expires_at, '')::timestamptz, k.status, nullif(k.closed_by, 0)
  FROM unnest(@identity_id::bigint[], @tenant_id::text[], @account_id::bigint[], (@amount::text[])::numeric[], (@remaining::text[])::numeric[], @expires_at_text::text[],
              @status::text[], @closed_by::bigint[])
       AS k (identity_id, tenant_id, account_id, amount, remaining, expires_at, status, closed_by);
