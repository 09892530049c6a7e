-- settle schema, version 20: an Idempotency-Key's answer names the
-- identities whose stored responses it quotes instead of holding copies.
--
-- The answer to a request quotes each record's stored response byte for
-- byte (the identity's `response`, which never changes), so a key's row
-- held a second copy of what its identities hold: on the edge bench's
-- one-record requests ≈ 700 B of a 1,120 B row. Now the row holds the
-- answer with the quoted responses cut out (`answer`), the ids of the
-- identities quoted (`answer_identities`) and where in `answer` each goes
-- (`answer_at`, byte offsets, ascending); settle_key_answer puts them back
-- together, byte for byte. A key with no quotes (and every key written
-- before this version) holds its whole answer in `answer`.
--
-- `response` is renamed, not kept beside: a settle of an earlier version
-- still serving the API when this lands fails on the column it names (its
-- requests are answered 503, retry) instead of replaying an answer with
-- the quotes cut out.
ALTER TABLE idempotency_keys RENAME COLUMN response TO answer;
ALTER TABLE idempotency_keys ADD COLUMN answer_identities bigint[],
                             ADD COLUMN answer_at         integer[],
                             ADD CONSTRAINT idempotency_keys_answer_quotes
                                 CHECK (cardinality(answer_identities) = cardinality(answer_at));
GRANT UPDATE (answer_identities, answer_at) ON idempotency_keys TO settle_app;

-- settle_key_answer is the answer a key's row stores: answer with the
-- stored response of identities[i] put back at byte ats[i] of it, for
-- each i. An identity quoted but not there (identities are never removed)
-- is an error, never a shorter answer.
CREATE FUNCTION settle_key_answer(tenant text, answer bytea, ids bigint[], ats integer[]) RETURNS bytea
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    whole  bytea := ''::bytea;
    quoted bytea;
    prev   integer := 0;
BEGIN
    IF answer IS NULL OR coalesce(cardinality(ids), 0) = 0 THEN
        RETURN answer;
    END IF;
    FOR i IN 1 .. cardinality(ids) LOOP
        SELECT convert_to(d.response::text, 'UTF8') INTO quoted
          FROM identities d
         WHERE d.id = ids[i] AND d.tenant_id = tenant;
        IF quoted IS NULL OR ats[i] IS NULL OR ats[i] < prev OR ats[i] > length(answer) THEN
            RAISE EXCEPTION 'settle_key_answer: the answer of a key of tenant % quotes identity % at byte %, which is not there',
                tenant, ids[i], ats[i];
        END IF;
        whole := whole || substring(answer FROM prev + 1 FOR ats[i] - prev) || quoted;
        prev := ats[i];
    END LOOP;
    RETURN whole || substring(answer FROM prev + 1);
END $$;
