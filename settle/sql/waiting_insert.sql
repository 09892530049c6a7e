INSERT INTO waiting (tenant_id, account_period, record_id, operation, target_period, target_record_id, fingerprint,
                     canonical, key, value, headers, topic, partition, "offset", response, status)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
                     $8::bytea[], $9::bytea[], $10::bytea[], $11::jsonb[], $12::text[], $13::integer[], $14::bigint[],
                     $15::json[], $16::text[])
