#!/usr/bin/env bash
# The waiting look-up's generic plan, as a settling transaction runs it
# (db.ProbesOnly's settings), for a batch of 1,000 keys of a tenant with no
# operation waiting: settle/sql/waiting_lookup.sql as it was before the
# tenants' gate (at 69db1d5, "old") and as it is in this checkout ("new"),
# each run three times; compare the last "Execution Time"s. The argument is
# a scratch database migrated by `settle migrate`; run from the repository.
#
#   docs/experiments/waiting-lookup-plan.bash 'postgres://postgres@127.0.0.1:5432/scratch?sslmode=disable'
set -euo pipefail
url=$1

# prepare NAME TYPES: the statement on stdin as a prepared statement, its
# sqlc parameters (@name) numbered as the types are.
prepare() {
	echo "PREPARE $1 ($2) AS"
	sed -e '/^--/d' -e 's/@target_tenant_id/$5/g' -e 's/@target_period/$6/g' -e 's/@target_record_id/$7/g' \
		-e 's/@tenant_id/$1/g' -e 's/@account_period/$2/g' -e 's/@record_id/$3/g' -e 's/@operation/$4/g' \
		-e 's/@tenants/$8/g'
}

{
	echo "SET enable_seqscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off;"
	echo "SET plan_cache_mode = force_generic_plan;"
	echo "SELECT array_agg('t'::text)::text AS t, array_agg('2026-11'::text)::text AS p,"
	echo "       array_agg('r-' || g)::text AS r, array_agg('usage'::text)::text AS o"
	echo "  FROM generate_series(1, 1000) AS g \\gset"
	git show 69db1d5:settle/sql/waiting_lookup.sql | prepare old 'text[], text[], text[], text[], text[], text[], text[]'
	prepare new 'text[], text[], text[], text[], text[], text[], text[], text[]' <settle/sql/waiting_lookup.sql
	for _ in 1 2 3; do
		echo "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE old(:'t', :'p', :'r', :'o', '{}', '{}', '{}');"
		echo "EXPLAIN (ANALYZE, COSTS OFF, SUMMARY) EXECUTE new(:'t', :'p', :'r', :'o', '{}', '{}', '{}', '{t}');"
	done
} | psql -X -q "$url" | grep -E 'Execution Time' | awk '{ print (NR % 2 ? "old" : "new") ":" $0 }'
