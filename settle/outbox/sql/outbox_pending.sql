-- name: OutboxPending :many
-- The queued outbox rows named by their keys (from outbox_queue_head.sql),
-- for the relay that holds the outbox lease: each message by its key
-- (tenant_id, id), then a settlement's identity by its own key, one index
-- probe each per row. Each probe is a lateral subquery of its own (LIMIT 1
-- keeps it from being flattened). Joined freely, a plan can walk the whole
-- outbox, every partition of it when the tables are partitioned by tenant;
-- and with the identity joined beside the outbox, the plan made while the
-- tables were empty (the relay's cached one, db.ProbesOnly) found the
-- identity through identities_scope_key on the tenant alone, reading the
-- tenant's every identity per row. A settlement's headers are read as their
-- parts and assembled by the relay (settlementHeaders), not built here, and
-- a settlement's value is its identity's stored response as stored (json:
-- its text, byte for byte), taken by the relay as it is instead of
-- converted here (outbox_messages builds the same for the other readers).
-- A key no longer queued is left out.
SELECT o.id, o.topic, o.key, o.value, i.response, o.headers AS stored_headers, i.settlement_id,
       o.tenant_id AS settlement_tenant_id, o.sequence, o.kind, o.version
  FROM unnest(@tenant_id::text[], @id::bigint[]) AS q (tenant_id, id)
 CROSS JOIN LATERAL (SELECT o.id, o.tenant_id, o.topic, o.key, o.value, o.headers, o.identity_id, o.sequence, o.kind, o.version
                       FROM outbox o
                      WHERE o.tenant_id = q.tenant_id AND o.id = q.id LIMIT 1) o
  LEFT JOIN LATERAL (SELECT i.response, i.settlement_id
                       FROM identities i
                      WHERE i.id = o.identity_id AND i.tenant_id = o.tenant_id LIMIT 1) i ON true
 ORDER BY o.id;

-- name: OutboxSettlementsPending :many
-- The settlements of outbox_settlements rows, each row found for a queue
-- row (@tenant_id, @queue_id) by one message id it names that is not an
-- outbox row (@id): the row keyed like the queue row (the trigger, and
-- the relay when it requeues, key a queue row by its row's id), or else
-- the tenant's last row whose first id is not above that message and
-- whose ids hold it (rows of concurrent transactions can interleave their
-- ids, so the walk back may pass a row or two). Every message of the row
-- comes back, each with its identity's stored response and settlement id
-- (probed by its key); the relay keeps the ones it asked for. A row is
-- read once however many of its messages are asked for.
SELECT u.id, s.topic, u.key, NULL::bytea AS value, i.response, u.headers AS stored_headers, i.settlement_id,
       s.tenant_id AS settlement_tenant_id, u.sequence, u.kind, s.version
  FROM unnest(@tenant_id::text[], @queue_id::bigint[], @id::bigint[]) AS q (tenant_id, queue_id, id)
 CROSS JOIN LATERAL ((SELECT s.tenant_id, s.topic, s.version, s.ids, s.identity_ids, s.keys, s.sequences, s.kinds, s.headers
                        FROM outbox_settlements s
                       WHERE s.tenant_id = q.tenant_id AND s.id = q.queue_id AND q.id = ANY (s.ids))
                     UNION ALL
                     (SELECT s.tenant_id, s.topic, s.version, s.ids, s.identity_ids, s.keys, s.sequences, s.kinds, s.headers
                        FROM outbox_settlements s
                       WHERE s.tenant_id = q.tenant_id AND s.id <= q.id AND q.id = ANY (s.ids)
                       ORDER BY s.id DESC)
                     LIMIT 1) s
 CROSS JOIN LATERAL unnest(s.ids, s.identity_ids, s.keys, s.sequences, s.kinds, s.headers)
       AS u (id, identity_id, key, sequence, kind, headers)
  LEFT JOIN LATERAL (SELECT i.response, i.settlement_id
                       FROM identities i
                      WHERE i.id = u.identity_id AND i.tenant_id = s.tenant_id LIMIT 1) i ON true;
