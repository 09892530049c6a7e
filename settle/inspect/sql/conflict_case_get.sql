-- name: ConflictCaseGet :one
-- One case with both canonical payloads.
SELECT c.id, c.tenant_id, c.account_period, c.record_id, c.operation, c.reason, c.status,
       c.opened_at, c.closed_at, c.detail, c.incoming_fingerprint, coalesce(c.identity_id, 0),
       c.stored_canonical, c.incoming_canonical, c.topic, c.partition, c."offset"
  FROM conflict_cases c
 WHERE c.id = $1;
