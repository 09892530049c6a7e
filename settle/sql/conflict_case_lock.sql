-- name: ConflictCaseLock :one
-- Locks a case for resolution and reads it with its resolution, if any.
SELECT c.tenant_id, c.account_period, c.record_id, c.operation, c.reason, c.status,
       c.incoming_canonical, c.topic, c.partition, c."offset",
       coalesce(r.decision, ''), coalesce(i.settlement_id, ''), i.response
  FROM conflict_cases c
  LEFT JOIN case_resolutions r ON r.tenant_id = c.tenant_id AND r.case_id = c.id
  LEFT JOIN identities i ON i.tenant_id = r.tenant_id AND i.id = r.identity_id
 WHERE c.id = @id
   FOR UPDATE OF c;
