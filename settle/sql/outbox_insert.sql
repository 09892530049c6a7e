-- name: OutboxInsert :batchmany
-- A settlement's row names its identity (@identity_id, 0 = none) and has no value:
-- the message is the identity's stored response (outbox_messages), its
-- headers the identity's settlement_id and tenant_id, this row's sequence,
-- kind and version (@sequence, @kind, @settlement_version; 0 and '' for
-- other rows), then its stored headers (the trace
-- context). Other rows carry their value and every header. @tenant_id is each
-- row's tenant ('' for a dead letter). The trigger outbox_enqueue puts
-- every row on the relay's queue. Returns each settlement's row id with its
-- identity's, for the messages this process keeps for its relay
-- (settle.Store.Written).
INSERT INTO outbox (topic, key, value, headers, identity_id, sequence, kind, version, tenant_id)
SELECT k.topic, k.key, k.value, k.headers, nullif(k.identity_id, 0), nullif(k.sequence, 0), nullif(k.kind, ''),
       CASE WHEN k.sequence <> 0 THEN @settlement_version::smallint END, k.tenant_id
  FROM unnest(@topic::text[], @key::bytea[], @value::bytea[], @headers::jsonb[], @identity_id::bigint[], @sequence::bigint[], @kind::text[], @tenant_id::text[])
       AS k (topic, key, value, headers, identity_id, sequence, kind, tenant_id)
RETURNING id, coalesce(identity_id, 0)::bigint AS identity_id;
