INSERT INTO dead_letters (topic, partition, "offset", key, value, headers, reason, error_class, error, attempts)
SELECT * FROM unnest($1::text[], $2::integer[], $3::bigint[], $4::bytea[], $5::bytea[], $6::jsonb[],
                     $7::text[], $8::text[], $9::text[], $10::integer[])
