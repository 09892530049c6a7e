-- Holds still active longer than the grace ($2: seconds) after their
-- expires_at ($1: tenant, '' = all): the sweep releases expired holds.
SELECT h.tenant_id, i.account_period, i.record_id, h.expires_at
  FROM holds h
  JOIN identities i ON i.tenant_id = h.tenant_id AND i.id = h.identity_id
 WHERE h.status = 'active' AND h.expires_at IS NOT NULL
   AND h.expires_at < now() - make_interval(secs => $2::float8)
   AND ($1 = '' OR h.tenant_id = $1)
 ORDER BY h.expires_at
 LIMIT 10000
