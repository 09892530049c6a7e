-- name: DeadLetterInsert :exec
INSERT INTO dead_letters (tenant_id, topic, partition, "offset", key, value, headers, reason, error_class, error, attempts)
SELECT k.tenant_id, k.topic, k.partition, k."offset", k.key, k.value, k.headers, k.reason, k.error_class, k.error, k.attempts
  FROM unnest(@tenant_id::text[], @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[], @key::bytea[], @value::bytea[], @headers::jsonb[],
                     @reason::text[], @error_class::text[], @error::text[], @attempts::integer[])
       AS k (tenant_id, topic, partition, "offset", key, value, headers, reason, error_class, error, attempts);
