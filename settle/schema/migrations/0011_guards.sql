-- settle schema, version 11: a guarded write checks its own rows.
--
-- The settling transaction's conditional updates (an account at the
-- sequence it was read at, a chain or a hold at its revision) must match
-- every row they name. The service checked the number of rows each
-- changed after the statement ran; the statement now checks it itself
-- and fails, so a transaction with one that matched fewer is rolled back
-- by PostgreSQL, and its COMMIT can travel in the same round trip as its
-- writes.
CREATE FUNCTION settle_guard(statement text, matched bigint, want bigint) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    IF matched <> want THEN
        RAISE EXCEPTION '%: guarded update matched % of % rows', statement, matched, want
            USING ERRCODE = 'data_exception',
                  HINT = 'another transaction changed a row this one had read and locked: a defect of the locking; report it';
    END IF;
END $$;
REVOKE ALL ON FUNCTION settle_guard(text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION settle_guard(text, bigint, bigint) TO settle_app;
