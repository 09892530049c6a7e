#!/usr/bin/env bash
# The scratch-table test behind "The identities' unique key led by a hash of
# the record" (BENCHMARKS.md, "Tried and not kept"): 600,000 rows of eight
# tenants and one period inserted in batches of 2,000 into a table keyed
# (tenant_id, account_period, record_id, operation) and into one keyed by a
# generated hash first, then 1,000 random keys probed in one join, six
# times each. Prints each insert run's time and each probe's. Usage:
#   docs/experiments/identity-key-hash-scratch.bash 'postgres://postgres@127.0.0.1:5432/scratch?sslmode=disable'
# (a database it may create tables ta and tb in).
set -euo pipefail
url=$1
psql "$url" -q <<'SQL'
DROP TABLE IF EXISTS ta, tb, keys;
CREATE TABLE ta (id bigint, tenant_id text, account_period text, record_id text, operation text, pad text,
  UNIQUE (tenant_id, account_period, record_id, operation));
CREATE TABLE tb (id bigint, tenant_id text, account_period text, record_id text, operation text, pad text,
  h bigint GENERATED ALWAYS AS (hashtextextended(tenant_id || chr(31) || account_period || chr(31) || record_id, 0)) STORED);
CREATE UNIQUE INDEX ON tb (h, tenant_id, account_period, record_id, operation);
SQL
for t in ta tb; do
  for r in 1 2 3; do
    s=$(date +%s%N)
    for b in $(seq 0 99); do
      echo "INSERT INTO $t (id, tenant_id, account_period, record_id, operation, pad) SELECT i, 'tenant-' || (i % 8), '2026-07',
        'usage-rec-' || (i::bigint * 7919 % 10000000) || '-' || i, 'usage', repeat('x', 50)
        FROM generate_series($r*1000000 + $b*2000, $r*1000000 + $b*2000 + 1999) i;"
    done | psql "$url" -q
    echo "$t insert of 200,000 rows: $(( ($(date +%s%N) - s) / 1000000 )) ms"
  done
done
{
  echo "CREATE TABLE keys AS SELECT array_agg(tenant_id) t, array_agg(account_period) p, array_agg(record_id) r, array_agg(operation) o
        FROM (SELECT * FROM ta ORDER BY random() LIMIT 1000) s;"
  echo '\timing on'
  for i in 1 2 3 4 5 6; do
    echo "SELECT count(*) FROM unnest((SELECT t FROM keys), (SELECT p FROM keys), (SELECT r FROM keys), (SELECT o FROM keys)) k(t,p,r,o)
          JOIN ta z ON (z.tenant_id, z.account_period, z.record_id, z.operation) = (k.t, k.p, k.r, k.o);"
    echo "SELECT count(*) FROM unnest((SELECT t FROM keys), (SELECT p FROM keys), (SELECT r FROM keys), (SELECT o FROM keys)) k(t,p,r,o)
          JOIN tb z ON z.h = hashtextextended(k.t || chr(31) || k.p || chr(31) || k.r, 0)
           AND (z.tenant_id, z.account_period, z.record_id, z.operation) = (k.t, k.p, k.r, k.o);"
  done
} | psql "$url" | grep '^Time' | paste - - | awk '{print "probe of 1,000 keys: ta " $2 " ms, tb " $5 " ms"}'
