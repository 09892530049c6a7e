#!/usr/bin/env bash
# Regenerates every package of typed queries, this one and the other owners'
# (sqlc.yaml at the repository's root), from their .sql files, or with
# "diff" only checks that they are up to date (CI runs that).
# sqlc checks every query against a scratch database migrated to the current
# schema: it is made on the PostgreSQL of $SETTLE_TEST_DATABASE_URL (the test
# database URL; default the local trust login) and dropped afterwards.
set -euo pipefail
cd "$(dirname "$0")/../../.."
mode=${1:-generate}
base=${SETTLE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
name="settle_sqlc_$$"
noquery=${base%%\?*}
query=${base#"$noquery"}
scratch="${noquery%/*}/${name}${query}"
psql "$base" -qX -c "CREATE DATABASE $name" >/dev/null
trap 'psql "$base" -qX -c "DROP DATABASE IF EXISTS $name" >/dev/null' EXIT
go run ./settle/internal/db/migrate "$scratch"
SQLC_DATABASE_URL="$scratch" go tool -modfile=tools/sqlc/go.mod sqlc "$mode"
# sqlc writes a file per query file and leaves the file of a query file that
# is gone: generate removes it, diff fails on it. Each output package (an
# owner's, sqlc.yaml) and the folders its query files come from:
owners=(
	"settle/internal/db:settle/sql settle/*/sql"
	"edge/idempotency/internal/db:edge/idempotency/sql"
	"edge/webhook/deliveries/internal/db:edge/webhook/deliveries/sql"
	"relay/outbox/internal/db:relay/outbox/sql"
)
stale=0
for owner in "${owners[@]}"; do
	out=${owner%%:*}
	read -r -a dirs <<<"${owner#*:}"
	for f in "$out"/*.sql.go; do
		[ -e "$f" ] || continue
		src=$(sed -n 's#^// source: ##p' "$f")
		found=0
		for d in "${dirs[@]}"; do
			if compgen -G "$d/$src" >/dev/null; then
				found=1
			fi
		done
		if [ $found = 0 ]; then
			if [ "$mode" = diff ]; then
				echo "$f: generated from $src, which is gone (go generate ./settle/internal/db removes it)" >&2
				stale=1
			else
				rm "$f"
			fi
		fi
	done
done
exit $stale
