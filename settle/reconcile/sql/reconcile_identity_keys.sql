-- Which of the given identities ($1 tenant, $2 period, $3 record ids, $4
-- operations) exist, settled or waiting.
SELECT k.record_id, k.operation,
       EXISTS (SELECT 1 FROM identities i WHERE i.tenant_id = $1 AND i.account_period = $2
                  AND i.record_id = k.record_id AND i.operation = k.operation)
       OR EXISTS (SELECT 1 FROM waiting w WHERE w.tenant_id = $1 AND w.account_period = $2
                  AND w.record_id = k.record_id AND w.operation = k.operation)
  FROM unnest($3::text[], $4::text[]) AS k(record_id, operation)
