#!/usr/bin/env bash
# Regenerates this package from the .sql files (sqlc.yaml at the repository's
# root), or with "diff" only checks that it is up to date (CI runs that).
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
