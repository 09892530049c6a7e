-- name: CaseResolutionInsert :exec
INSERT INTO case_resolutions (case_id, tenant_id, decision, amount, reason, resolved_by, identity_id)
VALUES (@case_id, @tenant_id, @decision, nullif(@amount::text, '')::numeric, @reason, @resolved_by, nullif(@identity_id::bigint, 0));
