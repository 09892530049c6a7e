-- name: OutboxPending :many
-- The oldest unpublished outbox rows, in id order (the order their
-- transactions wrote them), for the relay that holds the outbox lease.
-- The queue is read first and alone (a LIMIT subquery is planned on its
-- own), then each message by its key (tenant_id, id), one index probe per
-- row (LIMIT 1 keeps the lateral subquery from being flattened): joined
-- freely, a plan can walk the whole outbox, every partition of it when the
-- tables are partitioned by tenant, for every poll. A settlement's headers
-- are read as their parts and assembled by the relay (settlementHeaders),
-- not built here, and a settlement's value is its identity's stored
-- response as stored (json: its text, byte for byte), taken by the relay
-- as it is instead of converted here (outbox_messages builds the same for
-- the other readers).
SELECT m.id, m.topic, m.key, m.value, m.response, m.stored_headers, m.settlement_id, m.settlement_tenant_id, m.sequence,
       m.kind, m.version
  FROM (SELECT tenant_id, id FROM outbox_queue ORDER BY id LIMIT @max_rows::integer) q
 CROSS JOIN LATERAL (SELECT o.id, o.topic, o.key, o.value, i.response, o.headers AS stored_headers, i.settlement_id,
                            i.tenant_id AS settlement_tenant_id, o.sequence, o.kind, o.version
                       FROM outbox o
                       LEFT JOIN identities i ON i.tenant_id = o.tenant_id AND i.id = o.identity_id
                      WHERE o.tenant_id = q.tenant_id AND o.id = q.id LIMIT 1) m
 ORDER BY q.id;
