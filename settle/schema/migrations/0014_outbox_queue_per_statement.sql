-- settle schema, version 14: the relay's queue holds one row per statement
-- that wrote outbox rows (per tenant), naming them, instead of one row per
-- outbox row.
--
-- A settling transaction writes its outbox rows in one statement, and the
-- statement trigger queued every one of them: a heap row and an index entry
-- per settlement in the transaction, and a delete of each by the relay. Now
-- the trigger writes one queue row per tenant of the statement: its key is
-- the first of its outbox ids (id), and ids lists them all in id order. The
-- relay publishes a queue row's messages in that order, deletes the row
-- once every message is published or parked, and rewrites ids to the ones
-- left when only some were (outbox.Lease.Done).
--
-- Per-account order holds: a transaction that moves an account commits
-- before the next one that moves it writes, so every outbox id of the later
-- one is above every id of the earlier, and so is its queue row's key.
--
-- Queued rows of an earlier version become queue rows of one id each.
LOCK TABLE outbox IN SHARE ROW EXCLUSIVE MODE;
ALTER TABLE outbox_queue ADD COLUMN ids bigint[];
UPDATE outbox_queue SET ids = ARRAY[id];
ALTER TABLE outbox_queue ALTER COLUMN ids SET NOT NULL,
                         ADD CONSTRAINT outbox_queue_ids_check CHECK (cardinality(ids) > 0);
GRANT UPDATE ON outbox_queue TO settle_app;

CREATE OR REPLACE FUNCTION settle_outbox_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_queue (tenant_id, id, ids)
    SELECT tenant_id, min(id), array_agg(id ORDER BY id) FROM new_rows GROUP BY tenant_id;
    RETURN NULL;
END
$$;

-- An outbox row is published when no queue row names it and it is not
-- parked.
CREATE OR REPLACE VIEW outbox_messages AS
SELECT o.id, o.topic, o.key, coalesce(o.value, convert_to(i.response::text, 'UTF8')) AS value,
       CASE WHEN o.sequence IS NULL THEN o.headers
            ELSE jsonb_build_array(
                     jsonb_build_object('key', 'settlement_id', 'value', encode(convert_to(i.settlement_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'tenant_id', 'value', encode(convert_to(i.tenant_id, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'sequence', 'value', encode(convert_to(o.sequence::text, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'kind', 'value', encode(convert_to(o.kind, 'UTF8'), 'base64')),
                     jsonb_build_object('key', 'version', 'value', encode(convert_to(o.version::text, 'UTF8'), 'base64')))
                 || o.headers
       END AS headers,
       o.identity_id, o.created_at, q.id IS NULL AND p.id IS NULL AS published, p.id IS NOT NULL AS parked,
       o.headers AS stored_headers, i.settlement_id, i.tenant_id AS settlement_tenant_id, o.sequence, o.kind, o.version,
       o.tenant_id
  FROM outbox o
  LEFT JOIN identities i ON i.tenant_id = o.tenant_id AND i.id = o.identity_id
  LEFT JOIN (SELECT q.tenant_id, u.id FROM outbox_queue q CROSS JOIN LATERAL unnest(q.ids) AS u (id)) q
         ON q.tenant_id = o.tenant_id AND q.id = o.id
  LEFT JOIN outbox_parked p ON p.tenant_id = o.tenant_id AND p.id = o.id;

-- Retention: a published outbox row is one no queue row names.
CREATE OR REPLACE FUNCTION settle_prune(dead_letters_before timestamptz, dry_run boolean)
RETURNS TABLE (table_name text, rows bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    n_outbox bigint; n_webhook bigint; n_deliveries bigint; n_dead bigint;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_dead (tenant_id text, id bigint, topic text, partition integer, "offset" bigint)
        ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_outbox (tenant_id text, id bigint) ON COMMIT DROP;
    TRUNCATE settle_prune_dead, settle_prune_outbox;
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
