-- settle schema, version 22: roles for the people who use the CLI, and a
-- resolution that names its author's login.
--
-- Each person gets a login of their own, granted one of:
--   settle_reader    reads (version 5): every listing, explain, export.
--   settle_resolver  and resolves cases. Accepting a case settles its
--                    correction through the settling transaction, which
--                    writes what the service writes: it holds settle_app's
--                    grants.
--   settle_operator  and operates: dead-letter replay, period close, prune.
--                    The CLI refuses these to a resolver; the database
--                    grants both the same writes.
-- All three are NOLOGIN: a login uses one by being a member of it.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'settle_resolver') THEN
        CREATE ROLE settle_resolver NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'settle_operator') THEN
        CREATE ROLE settle_operator NOLOGIN;
    END IF;
END
$$;

GRANT settle_reader, settle_app TO settle_resolver;
GRANT settle_resolver TO settle_operator;

-- A person's resolution names the person's login: whatever name the
-- statement gives becomes a note after it ("alice (as bob)"), so no
-- free-text name is ever the recorded author alone. A person is a login
-- that is a member of settle_resolver and no superuser; the service's own
-- login (settle_app) records the analyst whose token the page checked.
CREATE FUNCTION settle_resolution_author() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    login text := session_user;
    prefix text := session_user || ' (as ';
BEGIN
    IF pg_has_role(session_user, 'settle_resolver', 'MEMBER')
       AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)
       AND NEW.resolved_by IS DISTINCT FROM login
       AND left(NEW.resolved_by, length(prefix)) IS DISTINCT FROM prefix THEN
        NEW.resolved_by := prefix || NEW.resolved_by || ')';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER case_resolutions_author BEFORE INSERT ON case_resolutions
    FOR EACH ROW EXECUTE FUNCTION settle_resolution_author();
