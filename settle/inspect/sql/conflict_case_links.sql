-- name: ConflictCaseLinks :one
-- What a case page links to: the stored identity (its fingerprint and first
-- delivery) and the identity a resolution settled (its adjustment).
SELECT coalesce(i.fingerprint, 0), i.id IS NOT NULL, coalesce(i.account_period, ''), coalesce(i.record_id, ''),
       coalesce(i.operation, ''), coalesce(i.outcome, ''), coalesce(i.settlement_id, ''), coalesce(i.topic, ''),
       coalesce(i.partition, 0), coalesce(i."offset", 0),
       coalesce(a.account_period, ''), coalesce(a.record_id, ''), coalesce(a.operation, '')
  FROM conflict_cases c
  LEFT JOIN identities i ON i.tenant_id = c.tenant_id AND i.id = c.identity_id
  LEFT JOIN case_resolutions r ON r.tenant_id = c.tenant_id AND r.case_id = c.id
  LEFT JOIN identities a ON a.tenant_id = r.tenant_id AND a.id = r.identity_id
 WHERE c.id = $1;
