-- name: OutboxPending :many
-- The oldest unpublished outbox rows, in id order (the order their
-- transactions wrote them), for the relay that holds the outbox lease.
-- The queue is read first and alone (a LIMIT subquery is planned on its
-- own), then each message by its key (tenant_id, id), one index probe per
-- row (LIMIT 1 keeps the lateral subquery from being flattened): joined
-- freely, a plan can walk the whole outbox, every partition of it when the
-- tables are partitioned by tenant, for every poll. A settlement's headers
-- are read as their parts and assembled by the relay (settlementHeaders),
-- not built here.
SELECT m.id, m.topic, m.key, m.value, m.stored_headers, m.settlement_id, m.settlement_tenant_id, m.sequence, m.kind, m.version
  FROM (SELECT tenant_id, id FROM outbox_queue ORDER BY id LIMIT @max_rows::integer) q
 CROSS JOIN LATERAL (SELECT x.id, x.topic, x.key, x.value, x.stored_headers, x.settlement_id, x.settlement_tenant_id,
                            x.sequence, x.kind, x.version
                       FROM outbox_messages x
                      WHERE x.tenant_id = q.tenant_id AND x.id = q.id LIMIT 1) m
 ORDER BY q.id;
