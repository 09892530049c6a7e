-- name: OutboxPending :many
-- The relay owns the outbox's rows once they are written; the settling
-- transaction is their other writer, inserting them (settle/sql's
-- outbox_insert.sql and outbox_settlements_insert.sql; settle/schema).
--
-- The queued messages the relay that holds the outbox lease reads from the
-- tables (from outbox_queue.sql's OutboxQueueHead), in one statement: the outbox rows
-- named by their keys (@tenant_id, @id), and the settlements of the
-- outbox_settlements rows named by their queue rows' keys (@queue_tenant_id,
-- @queue_id: the trigger keys a settlements row's queue row by the row's
-- id, and the relay keeps that key when it requeues). A queue row of
-- outbox rows finds no settlements row, and a settlement no outbox row:
-- one index probe each. Every settlement of a row comes back; the relay
-- keeps the ones its queue rows still name. Then each settlement's
-- identity by its own key. Each probe is a lateral subquery of its own
-- (LIMIT 1 keeps it from being flattened). Joined freely, a plan can walk
-- the whole outbox, every partition of it when the tables are partitioned
-- by tenant; and with the identity joined beside the outbox, the plan made
-- while the tables were empty (the relay's cached one, pgq.ProbesOnly)
-- found the identity through identities_scope_key on the tenant alone,
-- reading the tenant's every identity per row. A settlement's headers are
-- read as their parts and assembled by the relay (settlementHeaders), not
-- built here, and a settlement's value is its identity's stored response
-- as stored (json: its text, byte for byte), taken by the relay as it is
-- instead of converted here (outbox_messages builds the same for the other
-- readers). A key no longer queued is left out.
SELECT m.id, m.topic, m.key, m.value, i.response, m.stored_headers, i.settlement_id,
       m.tenant_id AS settlement_tenant_id, m.sequence, m.kind, m.version
  FROM (SELECT o.id, o.tenant_id, o.topic, o.key, o.value, o.headers AS stored_headers, o.identity_id, o.sequence, o.kind, o.version
          FROM unnest(@tenant_id::text[], @id::bigint[]) AS q (tenant_id, id)
         CROSS JOIN LATERAL (SELECT o.id, o.tenant_id, o.topic, o.key, o.value, o.headers, o.identity_id, o.sequence, o.kind, o.version
                               FROM outbox o
                              WHERE o.tenant_id = q.tenant_id AND o.id = q.id LIMIT 1) o
        UNION ALL
        SELECT u.id, s.tenant_id, s.topic, u.key, NULL::bytea, u.headers, u.identity_id, u.sequence, u.kind, s.version
          FROM unnest(@queue_tenant_id::text[], @queue_id::bigint[]) AS q (tenant_id, id)
         CROSS JOIN LATERAL (SELECT s.tenant_id, s.topic, s.version, s.ids, s.identity_ids, s.keys, s.sequences, s.kinds, s.headers
                               FROM outbox_settlements s
                              WHERE s.tenant_id = q.tenant_id AND s.id = q.id LIMIT 1) s
         CROSS JOIN LATERAL unnest(s.ids, s.identity_ids, s.keys, s.sequences, s.kinds, s.headers)
               AS u (id, identity_id, key, sequence, kind, headers)) m
  LEFT JOIN LATERAL (SELECT i.response, i.settlement_id
                       FROM identities i
                      WHERE i.id = m.identity_id AND i.tenant_id = m.tenant_id LIMIT 1) i ON true
 ORDER BY m.id;
