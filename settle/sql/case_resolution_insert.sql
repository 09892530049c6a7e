-- name: CaseResolutionInsert :exec
INSERT INTO case_resolutions (case_id, tenant_id, decision, amount, reason, resolved_by, identity_id)
VALUES ($1, $2, $3, nullif($4, '')::numeric, $5, $6, nullif($7::bigint, 0));
