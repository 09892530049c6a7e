-- Rebuilds every per-tenant table of a freshly migrated, empty database as
-- a table PARTITION BY HASH (tenant_id) with settle.partitions partitions
-- (set transaction-local by the caller), keeping everything the migrations
-- gave it: columns, defaults, identity (and its step), checks, keys and
-- indexes under their own names, triggers, foreign keys, grants, and the
-- views over it. PostgreSQL then enforces on every key the rule a
-- distributed PostgreSQL (Citus) does: the partition column is in every
-- primary and unique key and in the foreign keys between the tables.
-- A table already partitioned is left as it is; a table with rows is
-- refused (this is for a new database, not a migration of data).
DO $$
DECLARE
    tables text[] := string_to_array(current_setting('settle.partitioned_tables'), ',');
    n      integer := current_setting('settle.partitions')::integer;
    t      text;
    r      record;
    has    boolean;
    views  jsonb := '[]';
    fks    jsonb := '[]';
    trgs   jsonb := '[]';
    keys   jsonb;
    idxs   jsonb;
    acls   jsonb;
    seq    text;
    seqacl jsonb;
BEGIN
    IF n < 1 OR n > 1024 THEN
        RAISE EXCEPTION 'settle: % hash partitions: give 1 to 1024', n;
    END IF;
    tables := ARRAY(SELECT x FROM unnest(tables) x
                     WHERE (SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass('public.' || x)) = 'r');
    IF cardinality(tables) = 0 THEN
        RETURN;
    END IF;
    FOREACH t IN ARRAY tables LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM public.%I)', t) INTO has;
        IF has THEN
            RAISE EXCEPTION 'settle: table % has rows: only an empty database is partitioned', t;
        END IF;
    END LOOP;

    -- Views (all of the schema's: they are few), newest first to drop.
    FOR r IN SELECT c.oid, c.relname, pg_get_viewdef(c.oid) AS def, c.relacl
               FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v' ORDER BY c.oid LOOP
        views := views || jsonb_build_object('name', r.relname, 'def', r.def, 'acl', coalesce(to_jsonb(r.relacl::text[]), '[]'));
    END LOOP;
    FOR r IN SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v' ORDER BY c.oid DESC LOOP
        EXECUTE format('DROP VIEW public.%I', r.relname);
    END LOOP;

    -- Foreign keys from or to the tables.
    FOR r IN SELECT c.conname, c.conrelid::regclass::text AS rel, pg_get_constraintdef(c.oid) AS def
               FROM pg_constraint c
              WHERE c.contype = 'f'
                AND (c.conrelid::regclass::text = ANY (tables) OR c.confrelid::regclass::text = ANY (tables)) LOOP
        fks := fks || jsonb_build_object('name', r.conname, 'rel', r.rel, 'def', r.def);
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.rel, r.conname);
    END LOOP;

    FOREACH t IN ARRAY tables LOOP
        -- Triggers, keys, indexes and grants, read before the rename so their
        -- text names the table.
        FOR r IN SELECT pg_get_triggerdef(g.oid) AS def FROM pg_trigger g
                  WHERE g.tgrelid = ('public.' || t)::regclass AND NOT g.tgisinternal ORDER BY g.oid LOOP
            trgs := trgs || to_jsonb(r.def);
        END LOOP;
        SELECT coalesce(jsonb_agg(jsonb_build_object('name', c.conname, 'def', pg_get_constraintdef(c.oid)) ORDER BY c.oid), '[]')
          INTO keys FROM pg_constraint c WHERE c.conrelid = ('public.' || t)::regclass AND c.contype IN ('p', 'u');
        SELECT coalesce(jsonb_agg(jsonb_build_object('name', i.relname, 'def', pg_get_indexdef(x.indexrelid)) ORDER BY x.indexrelid), '[]')
          INTO idxs FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
         WHERE x.indrelid = ('public.' || t)::regclass
           AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid AND c.conrelid = x.indrelid);
        SELECT jsonb_build_object('table', coalesce(to_jsonb(c.relacl::text[]), '[]'),
                                  'columns', coalesce((SELECT jsonb_object_agg(a.attname, to_jsonb(a.attacl::text[]))
                                                         FROM pg_attribute a
                                                        WHERE a.attrelid = c.oid AND a.attacl IS NOT NULL AND NOT a.attisdropped), '{}'))
          INTO acls FROM pg_class c WHERE c.oid = ('public.' || t)::regclass;
        seq := NULL;
        IF EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = ('public.' || t)::regclass AND a.attname = 'id' AND a.attidentity <> '') THEN
            seq := pg_get_serial_sequence('public.' || t, 'id');
        END IF;
        SELECT coalesce(to_jsonb(c.relacl::text[]), '[]') INTO seqacl FROM pg_class c WHERE c.oid = seq::regclass;

        EXECUTE format('ALTER TABLE public.%I RENAME TO %I', t, t || '__plain');
        IF seq IS NOT NULL THEN
            EXECUTE format('ALTER SEQUENCE %s RENAME TO %I', seq, t || '__plain_id_seq');
        END IF;
        FOR r IN SELECT x.value ->> 'name' AS name FROM jsonb_array_elements(keys || idxs) x LOOP
            EXECUTE format('ALTER INDEX public.%I RENAME TO %I', r.name, r.name || '__plain');
        END LOOP;
        EXECUTE format('CREATE TABLE public.%I (LIKE public.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING IDENTITY'
                       ' INCLUDING GENERATED INCLUDING STORAGE) PARTITION BY HASH (tenant_id)', t, t || '__plain');
        FOR i IN 0 .. n - 1 LOOP
            EXECUTE format('CREATE TABLE public.%I PARTITION OF public.%I FOR VALUES WITH (MODULUS %s, REMAINDER %s)',
                           t || '_p' || i, t, n, i);
        END LOOP;
        FOR r IN SELECT x.value ->> 'name' AS name, x.value ->> 'def' AS def FROM jsonb_array_elements(keys) x LOOP
            EXECUTE format('ALTER TABLE public.%I ADD CONSTRAINT %I %s', t, r.name, r.def);
        END LOOP;
        FOR r IN SELECT x.value ->> 'def' AS def FROM jsonb_array_elements(idxs) x LOOP
            EXECUTE r.def;
        END LOOP;
        -- Each partition's index is named after its parent's, so an error
        -- names the constraint Go knows (settle strips the _pN suffix).
        FOR r IN SELECT pi.relname AS child, parent.relname AS parent, substring(pt.relname FROM '_p([0-9]+)$') AS part
                   FROM pg_inherits h
                   JOIN pg_class pi ON pi.oid = h.inhrelid
                   JOIN pg_class parent ON parent.oid = h.inhparent
                   JOIN pg_index x ON x.indexrelid = pi.oid
                   JOIN pg_class pt ON pt.oid = x.indrelid
                  WHERE parent.relkind = 'I' AND x.indrelid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = ('public.' || t)::regclass) LOOP
            EXECUTE format('ALTER INDEX public.%I RENAME TO %I', r.child, left(r.parent, 58) || '_p' || r.part);
        END LOOP;
        IF seq IS NOT NULL THEN
            -- LIKE copies the identity but not its sequence's step.
            EXECUTE format('ALTER TABLE public.%I ALTER COLUMN id SET INCREMENT BY %s', t,
                           (SELECT s.seqincrement FROM pg_sequence s WHERE s.seqrelid = (t || '__plain_id_seq')::regclass));
        END IF;
        EXECUTE format('DROP TABLE public.%I', t || '__plain');
        -- Grants, as they were.
        FOR r IN SELECT a.privilege_type, a.grantee FROM jsonb_array_elements_text(acls -> 'table') e CROSS JOIN LATERAL aclexplode(ARRAY[e::aclitem]) a LOOP
            EXECUTE format('GRANT %s ON public.%I TO %s', r.privilege_type, t,
                           CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.grantee::regrole::text) END);
        END LOOP;
        FOR r IN SELECT c.key AS col, a.privilege_type, a.grantee
                   FROM jsonb_each(acls -> 'columns') c
                  CROSS JOIN LATERAL jsonb_array_elements_text(c.value) e CROSS JOIN LATERAL aclexplode(ARRAY[e::aclitem]) a LOOP
            EXECUTE format('GRANT %s (%I) ON public.%I TO %s', r.privilege_type, r.col, t,
                           CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.grantee::regrole::text) END);
        END LOOP;
        IF seq IS NOT NULL THEN
            FOR r IN SELECT a.privilege_type, a.grantee FROM jsonb_array_elements_text(seqacl) e CROSS JOIN LATERAL aclexplode(ARRAY[e::aclitem]) a LOOP
                EXECUTE format('GRANT %s ON SEQUENCE %s TO %s', r.privilege_type, pg_get_serial_sequence('public.' || t, 'id'),
                               CASE WHEN r.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.grantee::regrole::text) END);
            END LOOP;
        END IF;
    END LOOP;

    FOR r IN SELECT x.value #>> '{}' AS def FROM jsonb_array_elements(trgs) x LOOP
        EXECUTE r.def;
    END LOOP;
    FOR r IN SELECT x.value ->> 'rel' AS rel, x.value ->> 'name' AS name, x.value ->> 'def' AS def FROM jsonb_array_elements(fks) x LOOP
        EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', r.rel, r.name, r.def);
    END LOOP;
    FOR r IN SELECT x.value ->> 'name' AS name, x.value ->> 'def' AS def, x.value -> 'acl' AS acl FROM jsonb_array_elements(views) x LOOP
        EXECUTE format('CREATE VIEW public.%I AS %s', r.name, r.def);
        EXECUTE format('REVOKE ALL ON public.%I FROM PUBLIC', r.name);
        EXECUTE (SELECT coalesce(string_agg(format('GRANT %s ON public.%I TO %s', a.privilege_type, r.name,
                                          CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text) END), '; '), 'SELECT 1')
                   FROM jsonb_array_elements_text(r.acl) e CROSS JOIN LATERAL aclexplode(ARRAY[e::aclitem]) a);
    END LOOP;
END
$$;
