#!/usr/bin/env bash
# WAL and Idempotency-Key row size per request of the HTTP edge, for each
# settle binary given, alternating, two runs each: a 3 s `settle bench
# --only edge --keep` (its saturation and half-rate runs), PostgreSQL's
# cluster-wide WAL bytes (pg_stat_wal) before and after it, divided by the
# keys the kept database holds, and the keys' average row size. The kept
# database is dropped after each run. Run it on an otherwise idle
# PostgreSQL: the WAL of anything else running counts too.
#
#   docs/experiments/edge-wal-per-request.bash /tmp/settle-28ae7cd bin/settle
set -euo pipefail
pg=(psql -h 127.0.0.1 -U postgres -qAtX)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in 1 2; do
	for bin in "$@"; do
		before=$("${pg[@]}" -c 'SELECT wal_bytes FROM pg_stat_wal')
		"$bin" bench --only edge --edge-duration 3s --keep --out "$out" >"$out/log" 2>&1
		after=$("${pg[@]}" -c 'SELECT wal_bytes FROM pg_stat_wal')
		db=$("${pg[@]}" -c "SELECT datname FROM pg_database WHERE datname LIKE 'settle_bench_edge%' ORDER BY oid DESC LIMIT 1")
		read -r keys row < <("${pg[@]}" -F ' ' -d "$db" -c 'SELECT count(*), round(avg(pg_column_size(k.*))) FROM idempotency_keys k')
		echo "round $round $bin: $keys keys, WAL $(( (after - before) / keys )) B per key, a key's row $row B"
		"${pg[@]}" -c "DROP DATABASE $db"
	done
done
