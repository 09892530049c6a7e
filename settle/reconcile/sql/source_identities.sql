-- name: SourceIdentities :many
-- One chunk of a source export's identities of one tenant, looked up by
-- scope key: what settle stored for each (settled, refused or
-- quarantined), with the newest conflict case of the key (case_id 0 and
-- empty reason and status when there is none).
SELECT k.account_period::text AS account_period, k.record_id::text AS record_id, k.operation::text AS operation,
       i.id, i.outcome, i.reason, i.canonical_version, i.canonical, coalesce(i.settlement_id, '') AS settlement_id,
       coalesce(c.id, 0)::bigint AS case_id, coalesce(c.reason, '')::text AS case_reason,
       coalesce(c.status, '')::text AS case_status
  FROM unnest(sqlc.arg(periods)::text[], sqlc.arg(record_ids)::text[], sqlc.arg(operations)::text[]) AS k (account_period, record_id, operation)
  JOIN identities i ON i.tenant_id = sqlc.arg(tenant_id) AND i.account_period = k.account_period
                   AND i.record_id = k.record_id AND i.operation = k.operation
  LEFT JOIN LATERAL (
        SELECT cc.id, cc.reason, cc.status
          FROM conflict_cases cc
         WHERE cc.tenant_id = sqlc.arg(tenant_id) AND cc.account_period = k.account_period
           AND cc.record_id = k.record_id AND cc.operation = k.operation
         ORDER BY cc.id DESC
         LIMIT 1) c ON true;
