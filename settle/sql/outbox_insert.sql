INSERT INTO outbox (topic, key, value, headers)
SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::jsonb[])
