-- name: OutboxPending :many
-- The oldest unpublished outbox rows, in id order (the order their
-- transactions wrote them), for the relay that holds the outbox lease.
-- The queue is read first and alone (a LIMIT subquery is planned on its
-- own), then each message by its key (tenant_id, id), then a settlement's
-- identity by its own key: one index probe each per row. Each probe is a
-- lateral subquery of its own (LIMIT 1 keeps it from being flattened).
-- Joined freely, a plan can walk the whole outbox, every partition of it
-- when the tables are partitioned by tenant, for every poll; and with the
-- identity joined beside the outbox, the plan made while the tables were
-- empty (the relay's cached one, db.ProbesOnly) found the identity through
-- identities_scope_key on the tenant alone, reading the tenant's every
-- identity per row. A settlement's headers are read as their parts and
-- assembled by the relay (settlementHeaders), not built here, and a
-- settlement's value is its identity's stored response as stored (json:
-- its text, byte for byte), taken by the relay as it is instead of
-- converted here (outbox_messages builds the same for the other readers).
SELECT o.id, o.topic, o.key, o.value, i.response, o.headers AS stored_headers, i.settlement_id,
       o.tenant_id AS settlement_tenant_id, o.sequence, o.kind, o.version
  FROM (SELECT tenant_id, id FROM outbox_queue ORDER BY id LIMIT @max_rows::integer) q
 CROSS JOIN LATERAL (SELECT o.id, o.tenant_id, o.topic, o.key, o.value, o.headers, o.identity_id, o.sequence, o.kind, o.version
                       FROM outbox o
                      WHERE o.tenant_id = q.tenant_id AND o.id = q.id LIMIT 1) o
  LEFT JOIN LATERAL (SELECT i.response, i.settlement_id
                       FROM identities i
                      WHERE i.id = o.identity_id AND i.tenant_id = o.tenant_id LIMIT 1) i ON true
 ORDER BY q.id;
