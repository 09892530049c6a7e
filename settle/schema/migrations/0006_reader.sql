-- settle schema, version 5: a role that can only read.
--
-- The month-end commands (settle reconcile --source, settle statement) and
-- the statement page run their reads in a READ ONLY transaction under this
-- role (SET LOCAL ROLE settle_reader): a defect on that path cannot write,
-- whatever the login may do otherwise. It is NOLOGIN: a login uses it by
-- being a member. settle_app's members may take it on, so the service's
-- login serves the statement page without a second credential.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'settle_reader') THEN
        CREATE ROLE settle_reader NOLOGIN;
    END IF;
END
$$;

GRANT USAGE ON SCHEMA public TO settle_reader;
GRANT SELECT ON identities, ledger_entries, accounts, chains, holds, waiting, conflict_cases,
    case_resolutions, deliveries, dead_letters, periods, schema_migrations TO settle_reader;
GRANT settle_reader TO settle_app;
