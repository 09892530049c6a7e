-- name: ReconcileHoldOverdue :many
-- Holds still active longer than the grace (grace_seconds) after their
-- expires_at (tenant_id, '' = all): the sweep releases expired holds.
SELECT h.tenant_id, i.account_period, i.record_id, h.expires_at::timestamptz AS expires_at
  FROM holds h
  JOIN identities i ON i.tenant_id = h.tenant_id AND i.id = h.identity_id
 WHERE h.status = 'active' AND h.expires_at IS NOT NULL
   AND h.expires_at < now() - make_interval(secs => sqlc.arg(grace_seconds)::float8)
   AND (@tenant_id::text = '' OR h.tenant_id = @tenant_id)
 ORDER BY h.expires_at
 LIMIT 10000;
