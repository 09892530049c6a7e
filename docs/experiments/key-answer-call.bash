#!/usr/bin/env bash
# What calling settle_key_answer for every key of a group costs, beside
# calling it only for a key whose answer quotes identities (the CASE in
# settle/idempotency/sql/idempotency_lookup_many.sql). A group's look-up
# joins its keys to idempotency_keys; new keys are absent, so the join finds
# nothing and the call gets NULLs. One pgbench client, prepared statements,
# ten absent keys a statement, the two forms alternating, 5 s a run, three
# rounds; it prints each run's mean latency in ms. Run it on an idle host,
# from the repository's root after `go build -o bin/settle ./cmd/settle`:
#
#   docs/experiments/key-answer-call.bash 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'
#
# It creates and drops a database of its own (settle_key_answer_cost).
set -euo pipefail
url=$1
db=settle_key_answer_cost
dir=$(mktemp -d)
trap 'rm -rf "$dir"; psql "$url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)"' EXIT
psql "$url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
dburl=$(sed -E "s#/[^/?]+(\?|$)#/$db\1#" <<<"$url")
bin/settle migrate --owner-url "$dburl" --log-level warn

# The statement is the one in the file, its arrays bound to ten keys that
# are not there; the bare form has its CASE replaced by the call alone.
sql=settle/idempotency/sql/idempotency_lookup_many.sql
stmt=$(grep -v '^--' "$sql" |
	sed -e "s/@tenant_id::text\[\]/array_fill('t-1'::text, ARRAY[10])/" \
		-e "s/@key::text\[\]/ARRAY['k1','k2','k3','k4','k5','k6','k7','k8','k9','k10']/" | tr '\n' ' ')
echo "$stmt" >"$dir/case.sql"
# the CASE spans two lines in the file; tr joined them
sed -E 's/\(CASE WHEN k.answer_identities <> .\{\}. THEN (settle_key_answer\([^)]*\)) +ELSE k.answer END\)/(\1)/' \
	"$dir/case.sql" >"$dir/bare.sql"
if cmp -s "$dir/case.sql" "$dir/bare.sql"; then
	echo "the CASE around settle_key_answer in $sql is not where this script looks for it" >&2
	exit 1
fi

for round in 1 2 3; do
	for form in bare case; do
		ms=$(pgbench -n -M prepared -c 1 -T 5 -f "$dir/$form.sql" "$dburl" 2>&1 | awk '/^latency average/ {print $4}')
		echo "round $round  $form  $ms ms a statement"
	done
done
