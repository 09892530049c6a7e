-- name: ConflictCaseLinks :one
-- What a case page links to: the stored identity (its fingerprint and first
-- delivery) and the identity a resolution settled (its adjustment).
SELECT coalesce(i.fingerprint, 0) AS fingerprint, (i.id IS NOT NULL)::boolean AS has_stored,
       coalesce(i.account_period, '') AS account_period, coalesce(i.record_id, '') AS record_id,
       coalesce(i.operation, '') AS operation, coalesce(i.outcome, '') AS outcome,
       coalesce(i.settlement_id, '') AS settlement_id, coalesce(i.topic, '') AS topic,
       coalesce(i.partition, 0) AS partition, coalesce(i."offset", 0) AS "offset",
       coalesce(a.account_period, '') AS adjustment_period, coalesce(a.record_id, '') AS adjustment_record_id,
       coalesce(a.operation, '') AS adjustment_operation
  FROM conflict_cases c
  LEFT JOIN identities i ON i.tenant_id = c.tenant_id AND i.id = c.identity_id
  LEFT JOIN case_resolutions r ON r.tenant_id = c.tenant_id AND r.case_id = c.id
  LEFT JOIN identities a ON a.tenant_id = r.tenant_id AND a.id = r.identity_id
 WHERE c.id = $1;
