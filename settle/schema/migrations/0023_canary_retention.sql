-- settle schema, version 23: the canary tenant's own history can be pruned.
--
-- Deduplication is kept for ever for every tenant but one: the canary's
-- (package canary, tenant 'settle-canary') exists to prove deduplication,
-- not to be remembered, and a run a minute would add ≈ 3.7 M identities a
-- year. settle_prune_canary removes the canary's whole accounts whose every
-- row is older than a cutoff: the accounts, their identities, ledger rows,
-- chains and holds, the cases of those identities with their resolutions,
-- their repeated deliveries, their published outbox messages and done
-- webhook deliveries; and the canary's dead letters and waiting operations
-- older than the cutoff. Whole accounts go, so every account left keeps its
-- whole chain and gapless sequence. The canary writes one account a day
-- (canary-YYYYMMDD), so a day's history leaves together.
--
-- The tenant is written here, not passed in: no caller can aim the function
-- at another tenant. The history tables' guards let a DELETE through only
-- while settle.pruning_canary is on (set by this function alone, transaction
-- local) AND the row is the canary tenant's: even the owner forging the
-- setting cannot remove another tenant's row through them.
CREATE FUNCTION settle_append_only_canary() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('settle.pruning_canary', true) = 'on' AND OLD.tenant_id = 'settle-canary' THEN
        RETURN OLD;
    END IF;
    IF TG_OP = 'DELETE' AND TG_ARGV[0] = 'kept' THEN
        RAISE EXCEPTION 'settle: % on %.% is not allowed: rows are kept', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF TG_OP = 'UPDATE' AND TG_ARGV[0] = 'kept' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'settle: % on %.% is not allowed: rows are append-only', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME
        USING ERRCODE = 'insufficient_privilege';
END
$$;

DROP TRIGGER identities_append_only ON identities;
CREATE TRIGGER identities_append_only BEFORE DELETE OR UPDATE ON identities
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_canary('append-only');
DROP TRIGGER ledger_entries_append_only ON ledger_entries;
CREATE TRIGGER ledger_entries_append_only BEFORE DELETE OR UPDATE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_canary('append-only');
DROP TRIGGER case_resolutions_append_only ON case_resolutions;
CREATE TRIGGER case_resolutions_append_only BEFORE DELETE OR UPDATE ON case_resolutions
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_canary('append-only');
DROP TRIGGER conflict_cases_no_delete ON conflict_cases;
CREATE TRIGGER conflict_cases_no_delete BEFORE DELETE ON conflict_cases
    FOR EACH ROW EXECUTE FUNCTION settle_append_only_canary('kept');

CREATE FUNCTION settle_prune_canary(before timestamptz, dry_run boolean)
RETURNS TABLE (table_name text, rows bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    canary CONSTANT text := 'settle-canary';
    n_accounts bigint; n_identities bigint; n_ledger bigint; n_chains bigint; n_holds bigint; n_cases bigint;
    n_resolutions bigint; n_repeats bigint; n_waiting bigint; n_outbox bigint; n_webhook bigint; n_dead bigint;
BEGIN
    IF before IS NULL THEN
        RAISE EXCEPTION 'settle_prune_canary: no cutoff' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_canary_accounts (id bigint) ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_canary_identities (id bigint) ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_canary_cases (id bigint) ON COMMIT DROP;
    CREATE TEMP TABLE IF NOT EXISTS settle_prune_canary_messages (id bigint) ON COMMIT DROP;
    TRUNCATE settle_prune_canary_accounts, settle_prune_canary_identities, settle_prune_canary_cases, settle_prune_canary_messages;

    -- An account goes when nothing of it is as new as the cutoff and every
    -- message of its identities is published (none queued or parked, no
    -- webhook delivery pending), and no identity of another account names
    -- one of its identities as root or target.
    INSERT INTO settle_prune_canary_accounts
    SELECT a.id
      FROM accounts a
     WHERE a.tenant_id = canary AND a.created_at < before
       AND NOT EXISTS (SELECT 1 FROM identities i
                        WHERE i.tenant_id = canary AND i.account_id = a.id
                          AND greatest(i.first_seen_at, i.last_attempted_at, i.committed_at) >= before)
       AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.tenant_id = canary AND l.account_id = a.id AND l.created_at >= before)
       AND NOT EXISTS (SELECT 1 FROM chains c WHERE c.tenant_id = canary AND c.account_id = a.id AND c.updated_at >= before)
       AND NOT EXISTS (SELECT 1 FROM identities i
                         JOIN delivery_repeats d ON d.tenant_id = canary AND d.identity_id = i.id
                        WHERE i.tenant_id = canary AND i.account_id = a.id AND d.at >= before)
       AND NOT EXISTS (SELECT 1 FROM identities i
                         JOIN conflict_cases c ON c.tenant_id = canary AND c.identity_id = i.id
                        WHERE i.tenant_id = canary AND i.account_id = a.id AND c.opened_at >= before)
       AND NOT EXISTS (SELECT 1 FROM identities i
                         JOIN identities o ON o.tenant_id = canary AND (o.root_id = i.id OR o.target_id = i.id)
                        WHERE i.tenant_id = canary AND i.account_id = a.id AND o.account_id IS DISTINCT FROM a.id)
       AND NOT EXISTS (SELECT 1 FROM identities i
                         JOIN outbox_settlements s ON s.tenant_id = canary AND i.id = ANY (s.identity_ids)
                        WHERE i.tenant_id = canary AND i.account_id = a.id
                          AND (EXISTS (SELECT 1 FROM outbox_queue q WHERE q.tenant_id = canary AND q.ids && s.ids)
                               OR EXISTS (SELECT 1 FROM outbox_parked p WHERE p.tenant_id = canary AND p.id = ANY (s.ids))
                               OR EXISTS (SELECT 1 FROM webhook_deliveries w
                                           WHERE w.tenant_id = canary AND w.outbox_id = ANY (s.ids) AND w.status <> 'done')))
       AND NOT EXISTS (SELECT 1 FROM identities i
                         JOIN outbox o ON o.tenant_id = canary AND o.identity_id = i.id
                        WHERE i.tenant_id = canary AND i.account_id = a.id
                          AND (EXISTS (SELECT 1 FROM outbox_queue q WHERE q.tenant_id = canary AND o.id = ANY (q.ids))
                               OR EXISTS (SELECT 1 FROM outbox_parked p WHERE p.tenant_id = canary AND p.id = o.id)
                               OR EXISTS (SELECT 1 FROM webhook_deliveries w
                                           WHERE w.tenant_id = canary AND w.outbox_id = o.id AND w.status <> 'done')));
    INSERT INTO settle_prune_canary_identities
    SELECT i.id FROM identities i JOIN settle_prune_canary_accounts a ON a.id = i.account_id WHERE i.tenant_id = canary;
    INSERT INTO settle_prune_canary_cases
    SELECT c.id FROM conflict_cases c JOIN settle_prune_canary_identities x ON x.id = c.identity_id WHERE c.tenant_id = canary;
    -- The messages of the rows that go: every message of an
    -- outbox_settlements row naming a pruned identity (all published, as
    -- checked above), and the outbox rows of pruned identities.
    INSERT INTO settle_prune_canary_messages
    SELECT u.id
      FROM outbox_settlements s CROSS JOIN LATERAL unnest(s.ids) AS u (id)
     WHERE s.tenant_id = canary AND s.identity_ids && ARRAY(SELECT id FROM settle_prune_canary_identities)
    UNION
    SELECT o.id FROM outbox o JOIN settle_prune_canary_identities x ON x.id = o.identity_id WHERE o.tenant_id = canary;

    SELECT count(*) INTO n_accounts FROM settle_prune_canary_accounts;
    SELECT count(*) INTO n_identities FROM settle_prune_canary_identities;
    SELECT count(*) INTO n_cases FROM settle_prune_canary_cases;
    SELECT count(*) INTO n_ledger FROM ledger_entries l JOIN settle_prune_canary_accounts a ON a.id = l.account_id WHERE l.tenant_id = canary;
    SELECT count(*) INTO n_chains FROM chains c JOIN settle_prune_canary_accounts a ON a.id = c.account_id WHERE c.tenant_id = canary;
    SELECT count(*) INTO n_holds FROM holds h JOIN settle_prune_canary_accounts a ON a.id = h.account_id WHERE h.tenant_id = canary;
    SELECT count(*) INTO n_resolutions FROM case_resolutions r
     WHERE r.tenant_id = canary
       AND (r.case_id IN (SELECT id FROM settle_prune_canary_cases) OR r.identity_id IN (SELECT id FROM settle_prune_canary_identities));
    SELECT count(*) INTO n_repeats FROM delivery_repeats d
     WHERE d.tenant_id = canary
       AND (d.identity_id IN (SELECT id FROM settle_prune_canary_identities) OR d.case_id IN (SELECT id FROM settle_prune_canary_cases));
    SELECT count(*) INTO n_waiting FROM waiting w WHERE w.tenant_id = canary AND w.since < before;
    SELECT count(*) INTO n_outbox FROM settle_prune_canary_messages;
    SELECT count(*) INTO n_webhook FROM webhook_deliveries w
     WHERE w.tenant_id = canary AND w.outbox_id IN (SELECT id FROM settle_prune_canary_messages);
    SELECT count(*) INTO n_dead FROM dead_letters d WHERE d.tenant_id = canary AND d.at < before;

    IF NOT dry_run THEN
        PERFORM set_config('settle.pruning', 'on', true), set_config('settle.pruning_canary', 'on', true);
        DELETE FROM webhook_deliveries w
         WHERE w.tenant_id = canary AND w.outbox_id IN (SELECT id FROM settle_prune_canary_messages);
        DELETE FROM outbox_settlements s
         WHERE s.tenant_id = canary AND s.identity_ids && ARRAY(SELECT id FROM settle_prune_canary_identities);
        DELETE FROM outbox o WHERE o.tenant_id = canary AND o.id IN (SELECT id FROM settle_prune_canary_messages);
        DELETE FROM delivery_repeats d
         WHERE d.tenant_id = canary
           AND (d.identity_id IN (SELECT id FROM settle_prune_canary_identities) OR d.case_id IN (SELECT id FROM settle_prune_canary_cases));
        DELETE FROM case_resolutions r
         WHERE r.tenant_id = canary
           AND (r.case_id IN (SELECT id FROM settle_prune_canary_cases) OR r.identity_id IN (SELECT id FROM settle_prune_canary_identities));
        DELETE FROM waiting w WHERE w.tenant_id = canary AND w.since < before;
        DELETE FROM conflict_cases c WHERE c.tenant_id = canary AND c.id IN (SELECT id FROM settle_prune_canary_cases);
        DELETE FROM holds h WHERE h.tenant_id = canary AND h.account_id IN (SELECT id FROM settle_prune_canary_accounts);
        DELETE FROM chains c WHERE c.tenant_id = canary AND c.account_id IN (SELECT id FROM settle_prune_canary_accounts);
        DELETE FROM ledger_entries l WHERE l.tenant_id = canary AND l.account_id IN (SELECT id FROM settle_prune_canary_accounts);
        DELETE FROM identities i WHERE i.tenant_id = canary AND i.id IN (SELECT id FROM settle_prune_canary_identities);
        DELETE FROM accounts a WHERE a.tenant_id = canary AND a.id IN (SELECT id FROM settle_prune_canary_accounts);
        DELETE FROM dead_letter_replays r
         WHERE r.tenant_id = canary AND r.dead_letter_id IN (SELECT d.id FROM dead_letters d WHERE d.tenant_id = canary AND d.at < before);
        DELETE FROM dead_letters d WHERE d.tenant_id = canary AND d.at < before;
        PERFORM set_config('settle.pruning', '', true), set_config('settle.pruning_canary', '', true);
        -- Recorded like settle_prune's runs: reconcile reads it to know the
        -- canary's offsets and topic messages may lack their rows.
        INSERT INTO prune_runs (dead_letters_before, removed)
        VALUES (NULL, jsonb_build_object('canary_tenant', canary, 'canary_before', before,
                                         'canary_accounts', n_accounts, 'canary_identities', n_identities,
                                         'canary_ledger_entries', n_ledger, 'canary_dead_letters', n_dead));
    END IF;
    RETURN QUERY VALUES ('accounts', n_accounts), ('identities', n_identities), ('ledger_entries', n_ledger),
                        ('chains', n_chains), ('holds', n_holds), ('conflict_cases', n_cases),
                        ('case_resolutions', n_resolutions), ('delivery_repeats', n_repeats), ('waiting', n_waiting),
                        ('outbox', n_outbox), ('webhook_deliveries', n_webhook), ('dead_letters', n_dead);
END
$$;
REVOKE ALL ON FUNCTION settle_prune_canary(timestamptz, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION settle_prune_canary(timestamptz, boolean) TO settle_app;
