-- settle schema, version 8: a settlement's outbox row stores what its
-- identity does not.
--
-- A settlement's message headers (settlement_id, tenant_id, sequence,
-- kind, version) are all on its identity row: the columns, and the stored
-- response. The outbox row kept a copy of them (≈ 280 bytes of jsonb per
-- settlement, the widest thing the settling transaction wrote after the
-- identity itself). It now stores only the headers the identity cannot
-- give: the trace context of the input record (traceparent, tracestate),
-- usually none. outbox_messages builds the others, in the order the
-- settling transaction wrote them, so every reader of a message (the
-- relay, explain, reconcile) sees the same headers as before.
--
-- Rows written before this version carry their full headers; a row whose
-- headers already name its settlement is shown as it is.
CREATE OR REPLACE VIEW outbox_messages AS
SELECT o.id, o.topic, o.key, coalesce(o.value, convert_to(i.response::text, 'UTF8')) AS value,
       CASE WHEN i.id IS NULL OR o.headers @> '[{"key": "settlement_id"}]' THEN o.headers
            ELSE jsonb_build_array(
                     jsonb_build_object('key', 'settlement_id', 'value', encode(convert_to(i.settlement_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'tenant_id', 'value', encode(convert_to(i.tenant_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'sequence', 'value', encode(convert_to(r.v ->> 'sequence', 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'kind', 'value', encode(convert_to(r.v ->> 'kind', 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'version', 'value', encode(convert_to(r.v ->> 'version', 'UTF8'), 'base64')))
                 || CASE WHEN jsonb_typeof(o.headers) = 'array' THEN o.headers ELSE '[]' END
       END AS headers,
       o.identity_id, o.created_at, q.id IS NULL AND p.id IS NULL AS published, p.id IS NOT NULL AS parked
  FROM outbox o
  LEFT JOIN identities i ON i.id = o.identity_id
  LEFT JOIN LATERAL (SELECT i.response::jsonb AS v) r ON i.id IS NOT NULL
  LEFT JOIN outbox_queue q ON q.id = o.id
  LEFT JOIN outbox_parked p ON p.id = o.id;
