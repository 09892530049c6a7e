-- name: ReconcileIdentityKeys :many
-- Which of the given identities (tenant_id, period, record_ids,
-- operations) exist, settled or waiting.
SELECT k.record_id::text AS record_id, k.operation::text AS operation,
       (EXISTS (SELECT 1 FROM identities i WHERE i.tenant_id = @tenant_id AND i.account_period = @period
                  AND i.record_id = k.record_id AND i.operation = k.operation)
       OR EXISTS (SELECT 1 FROM waiting w WHERE w.tenant_id = @tenant_id AND w.account_period = @period
                  AND w.record_id = k.record_id AND w.operation = k.operation))::boolean AS found
  FROM unnest(@record_ids::text[], @operations::text[]) AS k(record_id, operation);
