-- settle schema, version 26: a dead letter an analyst corrected is kept.
--
-- settle prune removed a replayed dead letter with its replay rows, and
-- dead letters older than its cut. A letter with an edit (version 24) was
-- removed at the next prune with the row saying where its corrected record
-- went, while the edit stayed: the audit named a letter that was gone and
-- no destination. A letter with an edit is now kept, with its replay rows,
-- as long as its edits are (for ever); edits are an analyst's hand work,
-- few beside the letters a replay or the cut removes.
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
     WHERE ((dead_letters_before IS NOT NULL AND d.at < dead_letters_before)
            OR EXISTS (SELECT 1 FROM dead_letter_replays r WHERE r.tenant_id = d.tenant_id AND r.dead_letter_id = d.id))
       AND NOT EXISTS (SELECT 1 FROM dead_letter_edits e WHERE e.tenant_id = d.tenant_id AND e.dead_letter_id = d.id);
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
