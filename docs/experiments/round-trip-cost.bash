#!/usr/bin/env bash
# What a round trip to PostgreSQL costs in CPU on this host, beside what a
# statement costs: one client (pgbench, prepared statements) sends
# `SELECT 1` one statement per round trip, then 20 statements per round
# trip in one pipeline, 5 s each. For each it prints the backend's CPU and
# pgbench's own per round trip (both from /proc, in µs). The argument is
# any database; run it on an idle host.
#
#   docs/experiments/round-trip-cost.bash 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
set -euo pipefail
url=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo 'SELECT 1;' >"$dir/one.sql"
{
	echo '\startpipeline'
	for _ in $(seq 20); do echo 'SELECT 1;'; done
	echo '\endpipeline'
} >"$dir/twenty.sql"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

for script in one twenty; do
	pgbench -n -M prepared -c 1 -T 5 -f "$dir/$script.sql" "$url" >"$dir/out" 2>&1 &
	bench=$!
	sleep 0.5
	backend=$(psql "$url" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' LIMIT 1")
	b0=$(ticks "$backend") c0=$(ticks "$bench") t0=$(date +%s%N)
	sleep 4
	b1=$(ticks "$backend") c1=$(ticks "$bench") t1=$(date +%s%N)
	wait $bench
	tps=$(awk '/^tps = / {print $3}' "$dir/out")
	trips=$(awk -v tps="$tps" -v ns=$((t1 - t0)) 'BEGIN {print tps * ns / 1e9}')
	awk -v s="$script" -v b=$((b1 - b0)) -v c=$((c1 - c0)) -v n="$trips" -v hz="$hz" 'BEGIN {
		printf "%-6s statement(s) per round trip: %.0f round trips/s, backend %.1f us, pgbench %.1f us of CPU per round trip\n",
			s, n / 4, b / hz * 1e6 / n, c / hz * 1e6 / n }'
done
