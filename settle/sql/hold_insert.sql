INSERT INTO holds (identity_id, tenant_id, account_id, amount, remaining, expires_at, status, closed_by)
SELECT k.identity_id, k.tenant_id, k.account_id, k.amount, k.remaining, k.expires_at, k.status, nullif(k.closed_by, 0)
  FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[]::numeric[], $5::text[]::numeric[], $6::timestamptz[],
              $7::text[], $8::bigint[])
       AS k (identity_id, tenant_id, account_id, amount, remaining, expires_at, status, closed_by)
