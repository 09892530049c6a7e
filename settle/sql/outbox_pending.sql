-- The oldest unpublished outbox rows, in id order (the order their
-- transactions wrote them), for the relay that holds the outbox lease.
-- The queue is read first and alone (a LIMIT subquery is planned on its
-- own): joined freely, a generic plan can walk the whole outbox in id
-- order and probe the queue for every row ever written. A settlement's
-- headers are read as their parts and assembled by the relay
-- (settlementHeaders), not built here.
SELECT m.id, m.topic, m.key, m.value, m.stored_headers, m.settlement_id, m.settlement_tenant_id, m.sequence, m.kind, m.version
  FROM (SELECT id FROM outbox_queue ORDER BY id LIMIT $1) q
  JOIN outbox_messages m ON m.id = q.id
 ORDER BY q.id
