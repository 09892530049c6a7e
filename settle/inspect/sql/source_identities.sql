-- name: SourceIdentities :many
-- One chunk of a source export's identities of one tenant, looked up by
-- scope key: what settle stored for each (settled, refused or
-- quarantined), with the newest conflict case of the key.
SELECT k.account_period, k.record_id, k.operation,
       i.id, i.outcome, i.reason, i.canonical_version, i.canonical, coalesce(i.settlement_id, ''),
       c.id, c.reason, c.status
  FROM unnest($2::text[], $3::text[], $4::text[]) AS k (account_period, record_id, operation)
  JOIN identities i ON i.tenant_id = $1 AND i.account_period = k.account_period
                   AND i.record_id = k.record_id AND i.operation = k.operation
  LEFT JOIN LATERAL (
        SELECT cc.id, cc.reason, cc.status
          FROM conflict_cases cc
         WHERE cc.tenant_id = $1 AND cc.account_period = k.account_period
           AND cc.record_id = k.record_id AND cc.operation = k.operation
         ORDER BY cc.id DESC
         LIMIT 1) c ON true;
