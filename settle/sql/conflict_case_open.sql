-- name: ConflictCaseOpen :many
-- Opens a conflict case, or finds the open one for the same identity, reason
-- and incoming payload. Returns nothing when a concurrent transaction is
-- opening the same case right now (the caller retries).
WITH opened AS (
    INSERT INTO conflict_cases (tenant_id, account_period, record_id, operation, reason, incoming_fingerprint,
                                identity_id, stored_canonical, incoming_canonical, diff, detail,
                                topic, partition, "offset")
    VALUES (@tenant_id, @account_period, @record_id, @operation, @reason, @incoming_fingerprint,
            nullif((@identity_id::bigint), 0), @stored_canonical, @incoming_canonical, @diff, @detail, @topic,
            @partition, sqlc.arg('offset'))
        ON CONFLICT ON CONSTRAINT conflict_cases_key DO NOTHING
    RETURNING id
)
SELECT id FROM opened
 UNION ALL
SELECT id FROM conflict_cases
 WHERE tenant_id = @tenant_id AND account_period = @account_period AND record_id = @record_id
   AND operation = @operation AND reason = @reason AND incoming_fingerprint = @incoming_fingerprint
 LIMIT 1;
