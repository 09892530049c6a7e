-- Does PostgreSQL compress an identity-sized row when asked to try below
-- its 2 KB threshold? Run on a scratch database:
--   createdb -h 127.0.0.1 -U postgres scratch && psql -h 127.0.0.1 -U postgres -d scratch -f docs/experiments/identity-toast.sql
-- Three tables get the same 20,000 rows shaped like the benchmark's
-- identities (a ≈ 560 B stored response, a ≈ 220 B canonical payload): as
-- settle stores them, and with toast_tuple_target = 128 and the two columns
-- stored MAIN with lz4 or pglz compression. It prints the WAL per row of
-- each insert and how many rows were compressed.
CREATE TABLE plain (id bigint, response json, canonical bytea);
CREATE TABLE lz4 (id bigint, response json, canonical bytea) WITH (toast_tuple_target = 128);
ALTER TABLE lz4 ALTER COLUMN response SET STORAGE MAIN, ALTER COLUMN canonical SET STORAGE MAIN,
                ALTER COLUMN response SET COMPRESSION lz4, ALTER COLUMN canonical SET COMPRESSION lz4;
CREATE TABLE pglz (id bigint, response json, canonical bytea) WITH (toast_tuple_target = 128);
ALTER TABLE pglz ALTER COLUMN response SET STORAGE MAIN, ALTER COLUMN canonical SET STORAGE MAIN,
                 ALTER COLUMN response SET COMPRESSION pglz, ALTER COLUMN canonical SET COMPRESSION pglz;
CREATE TEMP TABLE src AS
SELECT g AS id,
       format('{"version":1,"outcome":"settled","settlement_id":"%s","identity":{"tenant_id":"t-%s","account_period":"2026-07","record_id":"u-s-%s","operation":"usage"},"kind":"usage","subject":"s-%s","currency":"USD","entries":[{"bucket":"balance","amount":"-%s.5"}],"balance_after":"99%s","held_after":"0","sequence":%s,"chain_hash":"%s","committed_at":"2026-12-02T15:29:36.563132Z","occurred_at":"2026-07-14T12:00:00Z","source":{"topic":"usage","partition":4,"offset":%s}}',
              md5(g::text), g % 10, g, g % 10000, g % 97, g, g % 50, md5(g::text) || md5((g + 1)::text), g)::json AS response,
       convert_to(format('{"account_period":"2026-07","amount":"%s","currency":"USD","kind":"usage","meter":"gpu_seconds","occurred_at":"2026-07-14T12:00:00Z","quantity":"%s","record_id":"u-s-%s","subject":"s-%s","tenant_id":"t-%s","unit":"s"}',
                         g % 97, g % 97, g, g % 10000, g % 10), 'UTF8') AS canonical
  FROM generate_series(1, 20000) g;
SELECT round(avg(octet_length(response::text))) AS response_bytes, round(avg(octet_length(canonical))) AS canonical_bytes FROM src;
SELECT pg_current_wal_lsn() AS l \gset
INSERT INTO plain SELECT * FROM src;
SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'l') / 20000) AS plain_wal_per_row;
SELECT pg_current_wal_lsn() AS l \gset
INSERT INTO lz4 SELECT * FROM src;
SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'l') / 20000) AS lz4_wal_per_row;
SELECT pg_current_wal_lsn() AS l \gset
INSERT INTO pglz SELECT * FROM src;
SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), :'l') / 20000) AS pglz_wal_per_row;
SELECT 'lz4' AS t, count(*) FILTER (WHERE pg_column_compression(response) IS NOT NULL) AS compressed, count(*) FROM lz4
UNION ALL
SELECT 'pglz', count(*) FILTER (WHERE pg_column_compression(response) IS NOT NULL), count(*) FROM pglz;
