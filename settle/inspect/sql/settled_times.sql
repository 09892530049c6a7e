-- name: SettledTimes :many
-- When each settled identity was first seen (decoded) and when the
-- transaction that settled it began, for latency stages.
SELECT (tenant_id || '/' || account_period || '/' || record_id || '/' || operation)::text AS identity,
       first_seen_at, last_attempted_at
  FROM identities
 WHERE outcome = 'settled';
