-- name: ConflictCaseOpen :many
-- Opens a conflict case, or finds the open one for the same identity, reason
-- and incoming payload. Returns nothing when a concurrent transaction is
-- opening the same case right now (the caller retries).
WITH opened AS (
    INSERT INTO conflict_cases (tenant_id, account_period, record_id, operation, reason, incoming_fingerprint,
                                identity_id, stored_canonical, incoming_canonical, diff, detail,
                                topic, partition, "offset")
    VALUES ($1, $2, $3, $4, $5, $6, nullif($7::bigint, 0), $8, $9, $10, $11, $12, $13, $14)
        ON CONFLICT ON CONSTRAINT conflict_cases_key DO NOTHING
    RETURNING id
)
SELECT id FROM opened
 UNION ALL
SELECT id FROM conflict_cases
 WHERE tenant_id = $1 AND account_period = $2 AND record_id = $3 AND operation = $4
   AND reason = $5 AND incoming_fingerprint = $6
 LIMIT 1;
