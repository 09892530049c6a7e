-- name: CaseResolutionOfCases :many
-- The resolutions of a page of cases (case_ids), for the export.
SELECT r.case_id, r.decision, coalesce(r.amount::text, '')::text AS amount, r.reason, r.resolved_by, r.resolved_at,
       coalesce(r.identity_id, 0) AS identity_id, coalesce(i.settlement_id, '') AS settlement_id
  FROM case_resolutions r
  LEFT JOIN identities i ON i.tenant_id = r.tenant_id AND i.id = r.identity_id
 WHERE r.case_id = ANY (sqlc.arg(case_ids)::bigint[]);
