-- Claims new identities. The unique key identities_scope_key is the arbiter
-- of exactly-once: a concurrent claim of the same identity makes this
-- statement fail, and the whole batch is retried and sees it as settled.
INSERT INTO identities (id, tenant_id, account_period, record_id, operation, fingerprint,
                        canonical_version, canonical, outcome, reason, response, settlement_id,
                        account_id, root_id, source, attributes, topic, partition, "offset",
                        first_seen_at, last_attempted_at, attempts, subject, currency, target_id)
SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[],
                     $7::smallint[], $8::bytea[], $9::text[], $10::text[], $11::json[], $12::text[],
                     $13::bigint[], $14::bigint[], $15::text[], $16::jsonb[], $17::text[], $18::integer[],
                     $19::bigint[], $20::timestamptz[], $21::timestamptz[], $22::integer[], $23::text[],
                     $24::text[], $25::bigint[])
