-- A settlement's row names its identity ($5, 0 = none) and has no value:
-- the message is the identity's stored response (outbox_messages), its
-- headers the identity's settlement_id and tenant_id, this row's sequence,
-- kind and version ($6, $7, $8), then its stored headers (the trace
-- context). Other rows carry their value and every header. $9 is each
-- row's tenant ('' for a dead letter). The trigger outbox_enqueue puts
-- every row on the relay's queue.
INSERT INTO outbox (topic, key, value, headers, identity_id, sequence, kind, version, tenant_id)
SELECT k.topic, k.key, k.value, k.headers, nullif(k.identity_id, 0), k.sequence, k.kind,
       CASE WHEN k.sequence IS NOT NULL THEN $8::smallint END, k.tenant_id
  FROM unnest($1::text[], $2::bytea[], $3::bytea[], $4::jsonb[], $5::bigint[], $6::bigint[], $7::text[], $9::text[])
       AS k (topic, key, value, headers, identity_id, sequence, kind, tenant_id)
