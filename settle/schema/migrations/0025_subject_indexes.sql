-- settle schema, version 25: the account page finds one subject's open
-- cases and waiting records by index.
--
-- A case and a waiting record keep the record's canonical form, not its
-- subject in a column of its own; settle_canonical_subject reads it. The
-- canonical form is UTF-8 JSON and the database's encoding does not change
-- under it, so the function is immutable and may be indexed. Bytes that
-- are not a JSON object have no subject (NULL), never an error: an index
-- expression that failed would fail the settling transaction's insert.
-- Both indexes are partial: a case leaves the first when it is closed, a
-- record the second when its target arrives.
CREATE FUNCTION settle_canonical_subject(canonical bytea) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
    RETURN convert_from(canonical, 'UTF8')::jsonb ->> 'subject';
EXCEPTION WHEN data_exception THEN -- not UTF-8, not JSON, a \u0000: class 22
    RETURN NULL;
END
$$;

CREATE INDEX conflict_cases_open_subject ON conflict_cases (tenant_id, settle_canonical_subject(incoming_canonical), opened_at, id)
    WHERE status = 'open';
CREATE INDEX waiting_subject ON waiting (tenant_id, settle_canonical_subject(canonical), since, id)
    WHERE status = 'waiting';
