-- name: DeadLetterInsert :exec
-- The tenant, period and record id are what the letter's bytes say
-- (record.Written), '' where they say nothing.
INSERT INTO dead_letters (tenant_id, account_period, record_id, topic, partition, "offset", key, value, headers, reason, error_class, error, attempts)
SELECT k.tenant_id, k.account_period, k.record_id, k.topic, k.partition, k."offset", k.key, k.value, k.headers, k.reason, k.error_class, k.error, k.attempts
  FROM unnest(@tenant_id::text[], @account_period::text[], @record_id::text[], @topic::text[], @partition::integer[], sqlc.arg('offset')::bigint[],
              @key::bytea[], @value::bytea[], @headers::jsonb[], @reason::text[], @error_class::text[], @error::text[], @attempts::integer[])
       AS k (tenant_id, account_period, record_id, topic, partition, "offset", key, value, headers, reason, error_class, error, attempts);
