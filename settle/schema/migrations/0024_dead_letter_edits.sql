-- settle schema, version 24: a dead letter corrected and resent.
--
-- An operator edits a dead letter's record (its value, a JSON object) and
-- sends it to the letter's source topic, where it settles like any record.
-- The letter keeps its bytes; the edit is a row here: which fields changed
-- (diff: [{"field", "from", "to"}], each value as JSON text, null when
-- absent), the bytes sent, who and why. Where the resent record went is a
-- dead_letter_replays row naming the edit: the letter counts as replayed
-- (settle dlq replay leaves it out), and settle prune removes that row with
-- the letter. The edits stay: they are the audit, never pruned.
CREATE TABLE dead_letter_edits (
    id             bigint GENERATED ALWAYS AS IDENTITY,
    tenant_id      text        NOT NULL,
    dead_letter_id bigint      NOT NULL,
    diff           jsonb       NOT NULL,
    key            bytea,
    value          bytea       NOT NULL,
    edited_by      text        NOT NULL,
    reason         text        NOT NULL,
    at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dead_letter_edits_pkey PRIMARY KEY (id, tenant_id),
    CONSTRAINT dead_letter_edits_reason_check CHECK (btrim(reason) <> ''),
    CONSTRAINT dead_letter_edits_edited_by_check CHECK (edited_by <> '')
);
CREATE INDEX dead_letter_edits_letter ON dead_letter_edits (dead_letter_id);
CREATE TRIGGER dead_letter_edits_append_only BEFORE UPDATE OR DELETE ON dead_letter_edits
    FOR EACH ROW EXECUTE FUNCTION settle_append_only();
CREATE TRIGGER dead_letter_edits_no_truncate BEFORE TRUNCATE ON dead_letter_edits
    FOR EACH STATEMENT EXECUTE FUNCTION settle_append_only();

-- The replay row of a resend names its edit; explain finds a record's
-- letter by the coordinates it was resent to.
ALTER TABLE dead_letter_replays ADD COLUMN edit_id bigint;
CREATE INDEX dead_letter_replays_to ON dead_letter_replays (topic, partition, "offset");

-- Who edits: a person's login (a member of settle_resolver, no superuser)
-- must operate (settle_operator), and is recorded as the author whatever
-- name the statement gives ("alice (as bob)", as a resolution's author,
-- version 22). The service's own login (settle_app) records the analyst
-- whose token the page checked.
CREATE FUNCTION settle_dead_letter_edit_author() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    login text := session_user;
    prefix text := session_user || ' (as ';
BEGIN
    IF pg_has_role(session_user, 'settle_resolver', 'MEMBER')
       AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user) THEN
        IF NOT pg_has_role(session_user, 'settle_operator', 'MEMBER') THEN
            RAISE EXCEPTION 'settle: login % resolves cases but does not operate: editing a dead letter needs settle_operator', login
                USING ERRCODE = 'insufficient_privilege';
        END IF;
        IF NEW.edited_by IS DISTINCT FROM login AND left(NEW.edited_by, length(prefix)) IS DISTINCT FROM prefix THEN
            NEW.edited_by := prefix || NEW.edited_by || ')';
        END IF;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER dead_letter_edits_author BEFORE INSERT ON dead_letter_edits
    FOR EACH ROW EXECUTE FUNCTION settle_dead_letter_edit_author();

REVOKE ALL ON dead_letter_edits FROM PUBLIC;
GRANT SELECT, INSERT ON dead_letter_edits TO settle_app, settle_operator;
GRANT SELECT ON dead_letter_edits TO settle_reader;

-- What a dead letter's bytes say of its record (the settling path reads
-- them from a record that did not decode): explain finds a record's
-- letters by them. '' when they say nothing; letters written before keep ''.
ALTER TABLE dead_letters ADD COLUMN account_period text NOT NULL DEFAULT '',
                         ADD COLUMN record_id      text NOT NULL DEFAULT '';
CREATE INDEX dead_letters_record ON dead_letters (tenant_id, record_id) WHERE record_id <> '';
