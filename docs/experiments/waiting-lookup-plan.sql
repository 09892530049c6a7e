-- The waiting look-up's generic plan, as a settling transaction runs it
-- (db.ProbesOnly's settings), for a batch of 1,000 keys of a tenant with
-- no operation waiting: as it was before the tenants' gate (old, the text
-- of settle/sql/waiting_lookup.sql at 69db1d5) and as it is (new). On a
-- scratch database migrated by `settle migrate`:
--   psql -h 127.0.0.1 -U postgres -d scratch -f docs/experiments/waiting-lookup-plan.sql
-- Each is run three times; compare the last "Execution Time"s.
SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off; SET plan_cache_mode = force_generic_plan;
SELECT array_agg('t'::text)::text AS t, array_agg('2026-11'::text)::text AS p, array_agg('r-' || g)::text AS r,
       array_agg('usage'::text)::text AS o
  FROM generate_series(1, 1000) AS g \gset
PREPARE old (text[], text[], text[], text[], text[], text[], text[]) AS
SELECT w.id, w.tenant_id, w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id,
       w.fingerprint, w.canonical, w.key, w.value, w.headers, w.topic, w.partition, w."offset",
       w.response, w.status, coalesce(w.case_id, 0)
  FROM waiting w
 WHERE w.id IN (SELECT x.id
                  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k (t, p, r, o)
                  JOIN waiting x ON x.tenant_id = k.t AND x.account_period = k.p AND x.record_id = k.r AND x.operation = k.o
                 UNION
                SELECT x.id
                  FROM unnest($5::text[], $6::text[], $7::text[]) AS k (t, p, r)
                  JOIN waiting x ON x.tenant_id = k.t AND x.target_period = k.p AND x.target_record_id = k.r
                 WHERE x.status <> 'applied')
   AND w.status <> 'applied'
 ORDER BY w.id
   FOR UPDATE OF w;
PREPARE new (text[], text[], text[], text[], text[], text[], text[], text[]) AS
WITH live AS MATERIALIZED (
    SELECT array_agg(t.t) AS tenants
      FROM unnest($8::text[]) AS t
     WHERE EXISTS (SELECT 1 FROM waiting x WHERE x.tenant_id = t.t AND x.status <> 'applied')
)
SELECT w.id, w.tenant_id, w.account_period, w.record_id, w.operation, w.target_period, w.target_record_id,
       w.fingerprint, w.canonical, w.key, w.value, w.headers, w.topic, w.partition, w."offset",
       w.response, w.status, coalesce(w.case_id, 0)
  FROM waiting w
 WHERE w.id IN (SELECT x.id
                  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k (t, p, r, o)
                  JOIN waiting x ON x.tenant_id = k.t AND x.account_period = k.p AND x.record_id = k.r AND x.operation = k.o
                 WHERE (SELECT tenants FROM live) IS NOT NULL AND k.t = ANY ((SELECT tenants FROM live)::text[])
                 UNION
                SELECT x.id
                  FROM unnest($5::text[], $6::text[], $7::text[]) AS k (t, p, r)
                  JOIN waiting x ON x.tenant_id = k.t AND x.target_period = k.p AND x.target_record_id = k.r
                 WHERE (SELECT tenants FROM live) IS NOT NULL AND x.status <> 'applied'
                   AND k.t = ANY ((SELECT tenants FROM live)::text[]))
   AND w.status <> 'applied'
 ORDER BY w.id
   FOR UPDATE OF w;
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE old(:'t', :'p', :'r', :'o', '{}', '{}', '{}');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE new(:'t', :'p', :'r', :'o', '{}', '{}', '{}', '{t}');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE old(:'t', :'p', :'r', :'o', '{}', '{}', '{}');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE new(:'t', :'p', :'r', :'o', '{}', '{}', '{}', '{t}');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE old(:'t', :'p', :'r', :'o', '{}', '{}', '{}');
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE new(:'t', :'p', :'r', :'o', '{}', '{}', '{}', '{t}');
