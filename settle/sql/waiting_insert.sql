-- name: WaitingInsert :exec
INSERT INTO waiting (tenant_id, account_period, record_id, operation, target_period, target_record_id, fingerprint,
                     canonical, key, value, headers, topic, partition, "offset", response, status)
SELECT k.tenant_id, k.account_period, k.record_id, k.operation, k.target_period, k.target_record_id, k.fingerprint, k.canonical, k.key, k.value, k.headers, k.topic, k.partition, k."offset", k.response, k.status
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @operation::text[], @target_period::text[], @target_record_id::text[], @fingerprint::bigint[],
                     @canonical::bytea[], @key::bytea[], @value::bytea[], @headers::jsonb[], @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[],
                     @response::json[], @status::text[])
       AS k (tenant_id, account_period, record_id, operation, target_period, target_record_id, fingerprint, canonical, key, value, headers, topic, partition, "offset", response, status);
