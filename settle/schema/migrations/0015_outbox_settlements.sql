-- settle schema, version 15: a settling statement's settlements are one
-- outbox_settlements row per tenant, not one outbox row each.
--
-- A settlement's outbox row held only what its identity does not: the
-- identity's id, the account's key, the sequence and kind of its headers,
-- and its trace headers. Written one row per settlement, it was a heap row
-- and a primary-key entry each (≈ 150 B of WAL per settlement). Now the
-- settlements a statement writes for a tenant are one row whose arrays hold
-- them in order: ids (one outbox id each, drawn from the outbox's own
-- sequence, so that one id space still names every message: the queue,
-- the parked rows and the webhook deliveries keep naming messages by it),
-- identity_ids, keys, sequences, kinds and headers. The row's id is its
-- first message id, and its queue row (written by the trigger below) has
-- the same key.
--
-- Per-account order holds as before: the ids are drawn while the
-- transaction holds its accounts' locks, in the order of the settlements,
-- so every id of a later transaction that moves an account is above every
-- id of the earlier one.
--
-- The ids are reserved as identity ids are (migration 0003): the outbox's
-- sequence steps by a block of 1,000, a statement takes one nextval per
-- block of settlements instead of one per settlement (a sequence call
-- each was most of the insert's time), and an outbox row takes a block of
-- its own (ids stay unique and ordered, with gaps).
--
-- outbox_messages shows every message, one row each, from both tables.
-- Rows written before this version stay in outbox and are read as before.
ALTER TABLE outbox ALTER COLUMN id SET INCREMENT BY 1000;

CREATE TABLE outbox_settlements (
    tenant_id    text        NOT NULL,
    id           bigint      NOT NULL,
    topic        text        NOT NULL,
    version      smallint    NOT NULL,
    ids          bigint[]    NOT NULL,
    identity_ids bigint[]    NOT NULL,
    keys         bytea[]     NOT NULL,
    sequences    bigint[]    NOT NULL,
    kinds        text[]      NOT NULL,
    headers      jsonb[]     NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, id),
    CHECK (cardinality(ids) > 0 AND ids[1] = id
           AND cardinality(identity_ids) = cardinality(ids) AND cardinality(keys) = cardinality(ids)
           AND cardinality(sequences) = cardinality(ids) AND cardinality(kinds) = cardinality(ids)
           AND cardinality(headers) = cardinality(ids))
);
-- explain finds a settlement's row by its tenant and its transaction's
-- time (the identity's committed_at), as outbox_created serves outbox.
CREATE INDEX outbox_settlements_created ON outbox_settlements USING brin (created_at);

CREATE TRIGGER outbox_settlements_append_only BEFORE DELETE OR UPDATE ON outbox_settlements
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_prunable();
CREATE TRIGGER outbox_settlements_no_truncate BEFORE TRUNCATE ON outbox_settlements
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();

-- Every row goes on the relay's queue, under its own key.
CREATE FUNCTION settle_outbox_settlements_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_queue (tenant_id, id, ids) SELECT tenant_id, id, ids FROM new_rows;
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_settlements_enqueue AFTER INSERT ON outbox_settlements
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION settle_outbox_settlements_enqueue();

-- A webhook delivery per settlement and subscription to its topic, as for
-- an outbox row; its body is the identity's stored response. Nothing is
-- read when no subscription names the topic (the common case), and each
-- identity is probed by its key in a subquery of its own: joined freely,
-- the plan cached while the tables were small read every identity per
-- statement (0.25 s a batch at 100,000 identities).
CREATE FUNCTION settle_outbox_settlements_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM webhook_subscriptions s WHERE s.topic IN (SELECT n.topic FROM new_rows n)) THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_deliveries (outbox_id, tenant_id, settlement_id, body)
    SELECT u.id, n.tenant_id, coalesce(i.settlement_id, ''), convert_to(i.response::text, 'UTF8')
      FROM new_rows n
      JOIN webhook_subscriptions s ON s.topic = n.topic
     CROSS JOIN LATERAL unnest(n.ids, n.identity_ids) AS u (id, identity_id)
     CROSS JOIN LATERAL (SELECT i.settlement_id, i.response FROM identities i
                          WHERE i.id = u.identity_id AND i.tenant_id = n.tenant_id LIMIT 1) i
     ORDER BY u.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER outbox_settlements_webhook_enqueue AFTER INSERT ON outbox_settlements
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION settle_outbox_settlements_webhooks();

-- A parked message or a webhook delivery may name a settlement of either
-- table: their keys name a message, not an outbox row.
ALTER TABLE outbox_parked      DROP CONSTRAINT outbox_parked_outbox_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_outbox_id_fkey;

CREATE OR REPLACE VIEW outbox_messages AS
WITH m AS (
    SELECT o.id, o.topic, o.key, o.value, o.headers AS stored_headers, o.identity_id, o.created_at,
           o.sequence, o.kind, o.version, o.tenant_id
      FROM outbox o
    UNION ALL
    SELECT u.id, s.topic, u.key, NULL::bytea, u.headers, u.identity_id, s.created_at,
           u.sequence, u.kind, s.version, s.tenant_id
      FROM outbox_settlements s
     CROSS JOIN LATERAL unnest(s.ids, s.identity_ids, s.keys, s.sequences, s.kinds, s.headers)
           AS u (id, identity_id, key, sequence, kind, headers)
)
SELECT m.id, m.topic, m.key, coalesce(m.value, convert_to(i.response::text, 'UTF8')) AS value,
       CASE WHEN m.sequence IS NULL THEN m.stored_headers
            ELSE jsonb_build_array(
                     jsonb_build_object('key', 'settlement_id', 'value', encode(convert_to(i.settlement_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'tenant_id', 'value', encode(convert_to(i.tenant_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'sequence', 'value', encode(convert_to(m.sequence::text, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'kind', 'value', encode(convert_to(m.kind, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'version', 'value', encode(convert_to(m.version::text, 'UTF8'), 'base64')))
                 || m.stored_headers
       END AS headers,
       m.identity_id, m.created_at, q.id IS NULL AND p.id IS NULL AS published, p.id IS NOT NULL AS parked,
       m.stored_headers, i.settlement_id, i.tenant_id AS settlement_tenant_id, m.sequence, m.kind, m.version,
       m.tenant_id
  FROM m
  LEFT JOIN identities i ON i.tenant_id = m.tenant_id AND i.id = m.identity_id
  LEFT JOIN (SELECT q.tenant_id, u.id FROM outbox_queue q CROSS JOIN LATERAL unnest(q.ids) AS u (id)) q
         ON q.tenant_id = m.tenant_id AND q.id = m.id
  LEFT JOIN outbox_parked p ON p.tenant_id = m.tenant_id AND p.id = m.id;

GRANT SELECT, INSERT ON outbox_settlements TO settle_app;
GRANT SELECT ON outbox_settlements TO settle_reader;

-- Retention: an outbox_settlements row goes when none of its messages is
-- queued, parked or waiting for a webhook delivery; the count is of
-- messages, as for outbox rows.
CREATE OR REPLACE FUNCTION settle_prune(dead_letters_before timestamptz, dry_run boolean)
RETURNS TABLE (table_name text, rows bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    n_outbox bigint; n_webhook bigint; n_deliveries bigint; n_dead bigint;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_dead (tenant_id text, id bigint, topic text, partition integer, "offset" bigint)
        ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_outbox (tenant_id text, id bigint) ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_settlements (tenant_id text, id bigint) ON COMMIT DROP;
    TRUNCATE settle_prune_dead, settle_prune_outbox, settle_prune_settlements;
    INSERT INTO settle_prune_dead
    SELECT d.tenant_id, d.id, d.topic, d.partition, d."offset"
      FROM dead_letters d
     WHERE (dead_letters_before IS NOT NULL AND d.at < dead_letters_before)
        OR EXISTS (SELECT 1 FROM dead_letter_replays r WHERE r.tenant_id = d.tenant_id AND r.dead_letter_id = d.id);
    INSERT INTO settle_prune_outbox
    SELECT o.tenant_id, o.id
      FROM outbox o
     WHERE NOT EXISTS (SELECT 1 FROM outbox_queue q CROSS JOIN LATERAL unnest(q.ids) AS u (id)
                        WHERE q.tenant_id = o.tenant_id AND u.id = o.id)
       AND NOT EXISTS (SELECT 1 FROM outbox_parked p WHERE p.tenant_id = o.tenant_id AND p.id = o.id)
       AND NOT EXISTS (SELECT 1 FROM webhook_deliveries w
                        WHERE w.tenant_id = o.tenant_id AND w.outbox_id = o.id AND w.status <> 'done');
    INSERT INTO settle_prune_settlements
    SELECT s.tenant_id, s.id
      FROM outbox_settlements s
     WHERE NOT EXISTS (SELECT 1 FROM outbox_queue q WHERE q.tenant_id = s.tenant_id AND q.ids && s.ids)
       AND NOT EXISTS (SELECT 1 FROM outbox_parked p WHERE p.tenant_id = s.tenant_id AND p.id = ANY (s.ids))
       AND NOT EXISTS (SELECT 1 FROM webhook_deliveries w
                        WHERE w.tenant_id = s.tenant_id AND w.outbox_id = ANY (s.ids) AND w.status <> 'done');
    -- The messages of the settlement rows go with them.
    INSERT INTO settle_prune_outbox
    SELECT s.tenant_id, u.id
      FROM settle_prune_settlements x
      JOIN outbox_settlements s ON s.tenant_id = x.tenant_id AND s.id = x.id
     CROSS JOIN LATERAL unnest(s.ids) AS u (id);
    SELECT count(*) INTO n_dead FROM settle_prune_dead;
    SELECT count(*) INTO n_outbox FROM settle_prune_outbox;
    SELECT count(*) INTO n_webhook
      FROM webhook_deliveries w JOIN settle_prune_outbox o ON o.tenant_id = w.tenant_id AND o.id = w.outbox_id;
    SELECT count(*) INTO n_deliveries
      FROM delivery_repeats d
     WHERE d.identity_id IS NOT NULL
       AND EXISTS (SELECT 1 FROM identities i
                     JOIN periods p ON p.tenant_id = i.tenant_id AND p.account_period = i.account_period
                    WHERE i.tenant_id = d.tenant_id AND i.id = d.identity_id)
       AND NOT EXISTS (SELECT 1 FROM conflict_cases c
                        WHERE c.tenant_id = d.tenant_id AND c.id = d.case_id AND c.status = 'open');
    IF NOT dry_run THEN
        PERFORM set_config('settle.pruning', 'on', true);
        DELETE FROM webhook_deliveries w USING settle_prune_outbox o WHERE o.tenant_id = w.tenant_id AND o.id = w.outbox_id;
        DELETE FROM outbox x USING settle_prune_outbox o WHERE o.tenant_id = x.tenant_id AND o.id = x.id;
        DELETE FROM outbox_settlements s USING settle_prune_settlements x WHERE x.tenant_id = s.tenant_id AND x.id = s.id;
        DELETE FROM delivery_repeats d
         WHERE d.identity_id IS NOT NULL
           AND EXISTS (SELECT 1 FROM identities i
                         JOIN periods p ON p.tenant_id = i.tenant_id AND p.account_period = i.account_period
                        WHERE i.tenant_id = d.tenant_id AND i.id = d.identity_id)
           AND NOT EXISTS (SELECT 1 FROM conflict_cases c
                            WHERE c.tenant_id = d.tenant_id AND c.id = d.case_id AND c.status = 'open');
        DELETE FROM dead_letter_replays r USING settle_prune_dead x WHERE x.tenant_id = r.tenant_id AND x.id = r.dead_letter_id;
        DELETE FROM dead_letters d USING settle_prune_dead x WHERE x.tenant_id = d.tenant_id AND x.id = d.id;
        PERFORM set_config('settle.pruning', '', true);
        INSERT INTO prune_runs (dead_letters_before, removed)
        VALUES (dead_letters_before, jsonb_build_object('outbox', n_outbox, 'webhook_deliveries', n_webhook,
                                                        'delivery_repeats', n_deliveries, 'dead_letters', n_dead));
    END IF;
    RETURN QUERY VALUES ('outbox', n_outbox), ('webhook_deliveries', n_webhook),
                        ('delivery_repeats', n_deliveries), ('dead_letters', n_dead);
END
$$;
REVOKE ALL ON FUNCTION settle_prune(timestamptz, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION settle_prune(timestamptz, boolean) TO settle_app;
