-- settle schema, version 9: every per-tenant table is keyed by tenant, and
-- operational history can be pruned.
--
-- 1. Keys. A distributed PostgreSQL (Citus) and PostgreSQL's own
--    declarative partitioning both require the distribution column in every
--    primary and unique key, and in the foreign keys between co-located
--    tables. Every per-tenant table's primary key becomes (tenant_id, id)
--    (or (tenant_id, <its key>)), its unique keys lead with tenant_id, and
--    its foreign keys name (tenant_id, id). outbox, outbox_queue,
--    outbox_parked and dead_letters get a tenant_id column ('' for a row
--    that belongs to no tenant: a record that could not be decoded, and its
--    dead letter). delivery_repeats are keyed (tenant_id, topic,
--    partition, offset): a record's coordinates name it within its tenant.
--
--    Ids still come from one sequence per table, so an id alone still names
--    one row: tables that are looked up by an id alone (an analyst's case
--    or dead letter, a chain's root, a waiting operation) keep a plain index
--    on it. The hot path's joins match tenant_id as well (co-located).
--
-- 2. Retention (settle_prune): published outbox rows, the repeated
--    deliveries of closed periods and dead letters replayed or past a limit
--    are operational history;
--    identities, ledger rows and cases are never removed. The append-only
--    triggers of the pruned tables let a DELETE through only inside
--    settle_prune (a transaction-local setting that only that function sets
--    and clears); everyone else, the owner included, is still refused.
--
-- The migration rewrites no settled row: it adds columns, fills the new
-- tenant columns of the outbox from the identities they name (its
-- append-only trigger is off for that one statement) and swaps keys.

DROP VIEW identity_audit;
DROP VIEW outbox_messages;

-- Foreign keys that name a key this migration replaces.
ALTER TABLE chains           DROP CONSTRAINT chains_account_id_fkey,
                             DROP CONSTRAINT chains_root_id_fkey,
                             DROP CONSTRAINT chains_refund_id_fkey,
                             DROP CONSTRAINT chains_reclaim_id_fkey;
ALTER TABLE holds            DROP CONSTRAINT holds_account_id_fkey,
                             DROP CONSTRAINT holds_identity_id_fkey,
                             DROP CONSTRAINT holds_closed_by_fkey;
ALTER TABLE conflict_cases   DROP CONSTRAINT conflict_cases_identity_id_fkey;
ALTER TABLE case_resolutions DROP CONSTRAINT case_resolutions_case_id_fkey,
                             DROP CONSTRAINT case_resolutions_identity_id_fkey;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_outbox_id_fkey;
ALTER TABLE outbox_parked    DROP CONSTRAINT outbox_parked_outbox_fkey;

-- The tenant columns the outbox side lacked.
ALTER TABLE outbox        ADD COLUMN tenant_id text NOT NULL DEFAULT '';
ALTER TABLE outbox_queue  ADD COLUMN tenant_id text NOT NULL DEFAULT '';
ALTER TABLE outbox_parked ADD COLUMN tenant_id text NOT NULL DEFAULT '';
ALTER TABLE dead_letters  ADD COLUMN tenant_id text NOT NULL DEFAULT '';

ALTER TABLE outbox DISABLE TRIGGER outbox_append_only;
UPDATE outbox o SET tenant_id = i.tenant_id FROM identities i WHERE i.id = o.identity_id;
UPDATE outbox o SET tenant_id = w.tenant_id FROM webhook_deliveries w WHERE w.outbox_id = o.id AND o.identity_id IS NULL;
ALTER TABLE outbox ENABLE TRIGGER outbox_append_only;
UPDATE outbox_queue q SET tenant_id = o.tenant_id FROM outbox o WHERE o.id = q.id;
ALTER TABLE outbox_parked DISABLE TRIGGER outbox_parked_append_only;
UPDATE outbox_parked p SET tenant_id = o.tenant_id FROM outbox o WHERE o.id = p.id;
ALTER TABLE outbox_parked ENABLE TRIGGER outbox_parked_append_only;
ALTER TABLE webhook_deliveries DISABLE TRIGGER webhook_deliveries_guard;
UPDATE webhook_deliveries w SET tenant_id = o.tenant_id FROM outbox o WHERE o.id = w.outbox_id AND w.tenant_id <> o.tenant_id;
ALTER TABLE webhook_deliveries ENABLE TRIGGER webhook_deliveries_guard;

-- Primary and unique keys, tenant first.
ALTER TABLE accounts         DROP CONSTRAINT accounts_pkey,
                             ADD CONSTRAINT accounts_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE identities       DROP CONSTRAINT identities_pkey,
                             ADD CONSTRAINT identities_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE ledger_entries   DROP CONSTRAINT ledger_entries_pkey,
                             ADD CONSTRAINT ledger_entries_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE chains           DROP CONSTRAINT chains_pkey,
                             ADD CONSTRAINT chains_pkey PRIMARY KEY (tenant_id, root_id);
ALTER TABLE holds            DROP CONSTRAINT holds_pkey,
                             ADD CONSTRAINT holds_pkey PRIMARY KEY (tenant_id, identity_id);
ALTER TABLE waiting          DROP CONSTRAINT waiting_pkey,
                             ADD CONSTRAINT waiting_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE conflict_cases   DROP CONSTRAINT conflict_cases_pkey,
                             ADD CONSTRAINT conflict_cases_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE case_resolutions DROP CONSTRAINT case_resolutions_pkey,
                             DROP CONSTRAINT case_resolutions_case_key,
                             ADD CONSTRAINT case_resolutions_pkey PRIMARY KEY (tenant_id, id),
                             ADD CONSTRAINT case_resolutions_case_key UNIQUE (tenant_id, case_id);
ALTER TABLE delivery_repeats DROP CONSTRAINT deliveries_pkey,
                             ADD CONSTRAINT deliveries_pkey PRIMARY KEY (tenant_id, topic, partition, "offset");
ALTER TABLE dead_letters     DROP CONSTRAINT dead_letters_pkey,
                             DROP CONSTRAINT dead_letters_source_key,
                             ADD CONSTRAINT dead_letters_pkey PRIMARY KEY (tenant_id, id),
                             ADD CONSTRAINT dead_letters_source_key UNIQUE (tenant_id, topic, partition, "offset");
ALTER TABLE outbox           DROP CONSTRAINT outbox_pkey,
                             ADD CONSTRAINT outbox_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE outbox_queue     DROP CONSTRAINT outbox_queue_pkey,
                             ADD CONSTRAINT outbox_queue_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE outbox_parked    DROP CONSTRAINT outbox_parked_pkey,
                             ADD CONSTRAINT outbox_parked_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey,
                             ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (tenant_id, id);
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey,
                             DROP CONSTRAINT webhook_deliveries_outbox_key,
                             ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (tenant_id, id),
                             ADD CONSTRAINT webhook_deliveries_outbox_key UNIQUE (tenant_id, outbox_id);

-- Look-ups by an id alone (an analyst names a case, a dead letter or an
-- identity by its number; the relay takes its queue in id order; a hold, a
-- chain or a waiting operation is found by the id the transaction read).
CREATE INDEX accounts_id           ON accounts (id);
CREATE INDEX identities_id         ON identities (id);
CREATE INDEX chains_root           ON chains (root_id);
CREATE INDEX holds_identity        ON holds (identity_id);
CREATE INDEX waiting_id            ON waiting (id);
CREATE INDEX conflict_cases_id     ON conflict_cases (id);
CREATE INDEX case_resolutions_case ON case_resolutions (case_id);
CREATE INDEX dead_letters_id       ON dead_letters (id);
CREATE INDEX dead_letters_at       ON dead_letters (at);
CREATE INDEX outbox_queue_id       ON outbox_queue (id);
CREATE INDEX outbox_parked_id      ON outbox_parked (id);
CREATE INDEX idempotency_keys_id   ON idempotency_keys (id);
CREATE INDEX webhook_deliveries_id ON webhook_deliveries (id);
CREATE INDEX webhook_deliveries_outbox ON webhook_deliveries (outbox_id);

-- Foreign keys between co-located tables name the tenant.
ALTER TABLE chains ADD CONSTRAINT chains_account_id_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES accounts (tenant_id, id),
                   ADD CONSTRAINT chains_root_id_fkey FOREIGN KEY (tenant_id, root_id) REFERENCES identities (tenant_id, id),
                   ADD CONSTRAINT chains_refund_id_fkey FOREIGN KEY (tenant_id, refund_id) REFERENCES identities (tenant_id, id),
                   ADD CONSTRAINT chains_reclaim_id_fkey FOREIGN KEY (tenant_id, reclaim_id) REFERENCES identities (tenant_id, id);
ALTER TABLE holds ADD CONSTRAINT holds_account_id_fkey FOREIGN KEY (tenant_id, account_id) REFERENCES accounts (tenant_id, id),
                  ADD CONSTRAINT holds_identity_id_fkey FOREIGN KEY (tenant_id, identity_id) REFERENCES identities (tenant_id, id),
                  ADD CONSTRAINT holds_closed_by_fkey FOREIGN KEY (tenant_id, closed_by) REFERENCES identities (tenant_id, id);
ALTER TABLE conflict_cases ADD CONSTRAINT conflict_cases_identity_id_fkey FOREIGN KEY (tenant_id, identity_id)
    REFERENCES identities (tenant_id, id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE case_resolutions ADD CONSTRAINT case_resolutions_case_id_fkey FOREIGN KEY (tenant_id, case_id) REFERENCES conflict_cases (tenant_id, id),
                             ADD CONSTRAINT case_resolutions_identity_id_fkey FOREIGN KEY (tenant_id, identity_id)
                                 REFERENCES identities (tenant_id, id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_outbox_id_fkey FOREIGN KEY (tenant_id, outbox_id) REFERENCES outbox (tenant_id, id);
ALTER TABLE outbox_parked ADD CONSTRAINT outbox_parked_outbox_fkey FOREIGN KEY (tenant_id, id) REFERENCES outbox (tenant_id, id);

-- The queue and the webhook rows carry their outbox row's tenant.
CREATE OR REPLACE FUNCTION settle_outbox_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox_queue (tenant_id, id) SELECT tenant_id, id FROM new_rows;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION settle_webhook_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (outbox_id, tenant_id, settlement_id, body)
    SELECT n.id, n.tenant_id,
           coalesce(convert_from(m.value, 'UTF8')::jsonb ->> 'settlement_id', ''),
           m.value
      FROM new_rows n
      JOIN webhook_subscriptions s ON s.topic = n.topic
     CROSS JOIN LATERAL (SELECT coalesce(n.value, (SELECT convert_to(i.response::text, 'UTF8')
                                                     FROM identities i
                                                    WHERE i.tenant_id = n.tenant_id AND i.id = n.identity_id)) AS value) m
     ORDER BY n.id;
    RETURN NULL;
END
$$;

CREATE VIEW identity_audit AS
SELECT i.id, i.tenant_id, i.account_period, i.record_id, i.operation,
       i.outcome, i.first_seen_at, i.committed_at,
       greatest(i.last_attempted_at, max(d.at)) AS last_attempted_at,
       count(d.*) AS deliveries
  FROM identities i
  LEFT JOIN deliveries d ON d.tenant_id = i.tenant_id AND d.identity_id = i.id
 GROUP BY i.tenant_id, i.id;
GRANT SELECT ON identity_audit TO settle_app;

CREATE VIEW outbox_messages AS
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
  LEFT JOIN outbox_queue q ON q.tenant_id = o.tenant_id AND q.id = o.id
  LEFT JOIN outbox_parked p ON p.tenant_id = o.tenant_id AND p.id = o.id;
GRANT SELECT ON outbox_messages TO settle_app;

-- Retention. Each run is recorded: reconcile reads the last one to tell
-- a settlement whose outbox row was pruned after it was published from
-- one that never had a row.
CREATE TABLE prune_runs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at                  timestamptz NOT NULL DEFAULT now(),
    dead_letters_before timestamptz,
    removed             jsonb       NOT NULL
);
CREATE TRIGGER prune_runs_append_only BEFORE UPDATE OR DELETE ON prune_runs
    FOR EACH ROW EXECUTE FUNCTION settle_append_only();
CREATE TRIGGER prune_runs_no_truncate BEFORE TRUNCATE ON prune_runs
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();

-- The guard of the prunable tables: like settle_append_only, but a DELETE
-- inside settle_prune (which alone sets settle.pruning, transaction-local)
-- goes through. Updates are refused always; webhook deliveries keep their
-- own guard for updates.
CREATE FUNCTION settle_append_only_prunable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('settle.pruning', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'settle: % on %.% is not allowed: rows are append-only (settle prune removes operational history)',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
DROP TRIGGER deliveries_append_only ON delivery_repeats;
CREATE TRIGGER deliveries_append_only BEFORE UPDATE OR DELETE ON delivery_repeats
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_prunable();
DROP TRIGGER dead_letters_append_only ON dead_letters;
CREATE TRIGGER dead_letters_append_only BEFORE UPDATE OR DELETE ON dead_letters
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_prunable();
DROP TRIGGER outbox_append_only ON outbox;
CREATE TRIGGER outbox_append_only BEFORE UPDATE OR DELETE ON outbox
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_prunable();

CREATE OR REPLACE FUNCTION settle_webhook_deliveries_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF current_setting('settle.pruning', true) = 'on' AND OLD.status = 'done' THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION 'settle: DELETE on webhook_deliveries is not allowed'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.status IN ('done', 'dead') THEN
        RAISE EXCEPTION 'settle: webhook delivery % is %: it never changes', OLD.id, OLD.status
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF NEW.outbox_id <> OLD.outbox_id OR NEW.settlement_id <> OLD.settlement_id OR NEW.body <> OLD.body
       OR NEW.tenant_id <> OLD.tenant_id OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'settle: what webhook delivery % sends never changes', OLD.id
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;

-- Replays of dead letters: where each replayed record went. A dead letter
-- replayed is operational history settle prune removes, with these rows.
CREATE TABLE dead_letter_replays (
    tenant_id      text        NOT NULL,
    dead_letter_id bigint      NOT NULL,
    topic          text        NOT NULL,
    partition      integer     NOT NULL,
    "offset"       bigint      NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dead_letter_replays_pkey PRIMARY KEY (tenant_id, dead_letter_id, topic, partition, "offset"),
    CONSTRAINT dead_letter_replays_dead_letter_fkey FOREIGN KEY (tenant_id, dead_letter_id) REFERENCES dead_letters (tenant_id, id)
);
CREATE TRIGGER dead_letter_replays_append_only BEFORE UPDATE OR DELETE ON dead_letter_replays
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_prunable();
CREATE TRIGGER dead_letter_replays_no_truncate BEFORE TRUNCATE ON dead_letter_replays
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();
REVOKE ALL ON dead_letter_replays FROM PUBLIC;
GRANT SELECT, INSERT ON dead_letter_replays TO settle_app;
GRANT SELECT ON dead_letter_replays TO settle_reader;

-- A case is history too: it may change status, never go away.
CREATE FUNCTION settle_no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'settle: % on %.% is not allowed: rows are kept', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER conflict_cases_no_delete BEFORE DELETE ON conflict_cases
    FOR EACH ROW EXECUTE FUNCTION settle_no_delete();
CREATE TRIGGER conflict_cases_no_truncate BEFORE TRUNCATE ON conflict_cases
    FOR EACH STATEMENT EXECUTE FUNCTION settle_no_delete();

-- settle_prune removes, or with dry_run only counts, per table:
--   outbox             rows published (off the queue, not parked) whose
--                      webhook delivery, if any, is done;
--   webhook_deliveries the done deliveries of those rows;
--   delivery_repeats   the repeated deliveries of an identity whose (tenant,
--                      period) is closed, but a quarantine's while its case
--                      is open (a first delivery is its identity's row);
--   dead_letters       rows replayed (settle dlq replay, the page) and rows
--                      older than dead_letters_before (NULL: none), with
--                      their dead_letter_replays rows.
-- It never touches identities, ledger rows, accounts, chains, holds,
-- waiting operations, conflict cases or resolutions: their triggers have no
-- exception. A redelivery of a record whose delivery row is gone finds its
-- identity by scope key and is answered duplicate with the stored response.
-- SECURITY DEFINER: it runs as the schema's owner, so settle_app needs only
-- EXECUTE, never DELETE.
CREATE FUNCTION settle_prune(dead_letters_before timestamptz, dry_run boolean)
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
     WHERE NOT EXISTS (SELECT 1 FROM outbox_queue q WHERE q.tenant_id = o.tenant_id AND q.id = o.id)
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
REVOKE ALL ON FUNCTION settle_prune(timestamptz, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION settle_prune(timestamptz, boolean) TO settle_app;
GRANT SELECT ON prune_runs TO settle_app, settle_reader;
GRANT SELECT ON outbox_parked TO settle_reader;
