# shellcheck shell=bash
# Sourced by .ci/run: makes a PostgreSQL server the tests can use and exports
# SETTLE_TEST_DATABASE_URL for it. Safe under `set -euo pipefail`, and
# idempotent: run it again and it changes nothing it changed before.
#
# The tests need a superuser `postgres` that logs in over TCP on loopback
# without a password, and max_connections >= 300. In order:
#
#  1. SETTLE_TEST_DATABASE_URL already set: use that server, as it is.
#  2. The server programs are missing: install Debian's `postgresql` (root).
#  3. The machine's server on 127.0.0.1:${CI_PG_PORT:-5432}: start its Debian
#     cluster when it is down; use it when `postgres` logs in there without a
#     password and it allows 300 connections.
#  4. Otherwise (Debian's default asks for a password on TCP, and allows 100
#     connections): start a private throwaway cluster, trust auth on
#     127.0.0.1 only, on a free port, owned by the `postgres` system user when
#     run as root, and removed on exit.
#
# The machine's server is never reconfigured or restarted: changing its
# settings, pg_hba.conf or the postgres role's password would change a
# server that is not ours, and a restart cuts off its other clients.
# ci_machine_check tells whether it stayed as it was.

ci_pg_port=${CI_PG_PORT:-5432}
ci_machine_url=   # the machine's server, when .ci/run can log in to it
ci_machine_state= # ci_machine_read of it, before the run

ci_die() {
  echo "ci: $*" >&2
  exit 1
}

# ci_at_exit holds commands run when the script exits, however it ends,
# the last added first; ci_exit_status is the exit status they see (and
# may set).
ci_at_exit=()
ci_exit_status=0
ci_exit() {
  ci_exit_status=$?
  local i
  for ((i = ${#ci_at_exit[@]} - 1; i >= 0; i--)); do
    eval "${ci_at_exit[i]}" || true
  done
  exit "$ci_exit_status"
}
trap ci_exit EXIT

# ci_pg_bindir prints the directory of initdb, pg_ctl and postgres (the
# newest Debian major version first), or nothing.
ci_pg_bindir() {
  local d
  if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
    return
  fi
  for d in $(compgen -G '/usr/lib/postgresql/*/bin' | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
      echo "$d"
      return
    fi
  done
}

# ci_apt_install installs Debian packages (one `apt-get update` per run).
ci_apt_updated=
ci_apt_install() {
  [ "$(id -u)" -eq 0 ] || ci_die "need the Debian packages $*: run .ci/run as root, or install them (apt-get install $*)"
  if [ -z "$ci_apt_updated" ]; then
    apt-get update -qq
    ci_apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# ci_psql URL SQL runs one statement without ever prompting for a password.
ci_psql() {
  psql "$1" -X -w -v ON_ERROR_STOP=1 -Atc "$2"
}

# ci_wait_ready HOST PORT waits up to 60 s for the server to accept connections.
ci_wait_ready() {
  local _
  for _ in $(seq 1 60); do
    pg_isready -h "$1" -p "$2" -q && return 0
    sleep 1
  done
  return 1
}

# ci_debian_cluster prints "VERSION NAME STATUS" of the Debian cluster on
# port $ci_pg_port, or nothing.
ci_debian_cluster() {
  command -v pg_lsclusters >/dev/null 2>&1 || return 0
  pg_lsclusters -h 2>/dev/null | awk -v p="$ci_pg_port" '$3 == p { print $1, $2, $4; exit }'
}

ci_max_connections() {
  local url=$1 mc
  if ! mc=$(ci_psql "$url" 'show max_connections') || ! [[ "$mc" =~ ^[0-9]+$ ]]; then
    ci_die "cannot read max_connections from $url (got '${mc:-nothing}')"
  fi
  echo "$mc"
}

ci_private_cluster() {
  local bindir=$1 dir port run_as=()
  dir=$(mktemp -d /tmp/settle-ci-pg.XXXXXX)
  # Free port: the first one from 55432 nothing listens on.
  for port in $(seq 55432 55532) none; do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
  done
  [ "$port" != none ] || ci_die "no free port in 55432-55532 for a private PostgreSQL"
  if [ "$(id -u)" -eq 0 ]; then
    # initdb and postgres refuse to run as root.
    id postgres >/dev/null 2>&1 || ci_die "running as root, and there is no postgres system user to own a private cluster"
    chown postgres: "$dir"
    run_as=(runuser -u postgres --)
  fi
  echo "ci: starting a private PostgreSQL in $dir on 127.0.0.1:$port (trust on loopback, removed on exit)"
  "${run_as[@]}" "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-instructions >"$dir/initdb.log" 2>&1 ||
    ci_die "initdb failed: $(tail -5 "$dir/initdb.log")"
  "${run_as[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c max_connections=300 -c fsync=off" >/dev/null ||
    ci_die "the private PostgreSQL did not start: $(tail -5 "$dir/server.log")"
  # The exit hooks own the cluster from here: stop it and remove it however
  # the run ends.
  ci_at_exit+=("${run_as[*]} $bindir/pg_ctl -D $dir/data -m fast -w stop >/dev/null 2>&1; rm -rf $dir")
  export SETTLE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
}

ci_postgres() {
  if [ -n "${SETTLE_TEST_DATABASE_URL:-}" ]; then
    echo "ci: using SETTLE_TEST_DATABASE_URL as given"
    ci_psql "$SETTLE_TEST_DATABASE_URL" 'select 1' >/dev/null ||
      ci_die "SETTLE_TEST_DATABASE_URL does not let the tests log in; fix it or unset it to let .ci/run start a server"
    return
  fi

  local bindir
  bindir=$(ci_pg_bindir)
  if [ -z "$bindir" ] || ! command -v psql >/dev/null 2>&1 || ! command -v pg_isready >/dev/null 2>&1; then
    echo "ci: installing PostgreSQL (Debian package postgresql)"
    ci_apt_install postgresql
    bindir=$(ci_pg_bindir)
    [ -n "$bindir" ] || ci_die "installed postgresql, but found no initdb/pg_ctl/postgres in /usr/lib/postgresql/*/bin"
  fi

  local url="postgres://postgres@127.0.0.1:$ci_pg_port/postgres?sslmode=disable" cluster
  cluster=$(ci_debian_cluster)
  if [ -n "$cluster" ] && ! pg_isready -h 127.0.0.1 -p "$ci_pg_port" -q; then
    # shellcheck disable=SC2086 # "VERSION NAME STATUS", split on purpose
    set -- $cluster
    echo "ci: starting the machine's PostgreSQL cluster $1/$2"
    pg_ctlcluster --skip-systemctl-redirect "$1" "$2" start || echo "ci: could not start cluster $1/$2; trying a private one" >&2
    ci_wait_ready 127.0.0.1 "$ci_pg_port" || true
  fi

  if pg_isready -h 127.0.0.1 -p "$ci_pg_port" -q && ci_psql "$url" 'select 1' >/dev/null 2>&1; then
    ci_machine_url=$url
    ci_machine_state=$(ci_machine_read)
    # Test packages run side by side, each with its own databases and
    # pools, some with child settle processes: the default 100 connections
    # are not enough headroom.
    local mc
    mc=$(ci_max_connections "$url")
    if [ "$mc" -ge 300 ]; then
      echo "ci: using the PostgreSQL on 127.0.0.1:$ci_pg_port (user postgres, no password, max_connections $mc)"
      export SETTLE_TEST_DATABASE_URL="$url"
      return
    fi
    echo "ci: the PostgreSQL on 127.0.0.1:$ci_pg_port allows $mc connections, the tests need 300: it is left as it is"
  else
    echo "ci: user postgres cannot log in without a password on 127.0.0.1:$ci_pg_port (or nothing answers there)"
  fi

  ci_private_cluster "$bindir"
  ci_psql "$SETTLE_TEST_DATABASE_URL" 'select 1' >/dev/null || ci_die "cannot log in to the private PostgreSQL"
  [ "$(ci_max_connections "$SETTLE_TEST_DATABASE_URL")" -ge 300 ] || ci_die "the private PostgreSQL has max_connections below 300"
}

# ci_machine_read prints the machine server's start time and
# max_connections: what a restart or a reconfiguration would change.
ci_machine_read() {
  ci_psql "$ci_machine_url" "select pg_postmaster_start_time() || ' max_connections=' || current_setting('max_connections')"
}

# ci_machine_check fails when the machine's server (when .ci/run could log
# in to it) was restarted or its max_connections changed since ci_postgres.
ci_machine_check() {
  [ -n "${ci_machine_url:-}" ] || return 0
  local now
  now=$(ci_machine_read 2>/dev/null) || now="not answering"
  if [ "$now" != "$ci_machine_state" ]; then
    echo "ci: the machine's PostgreSQL on 127.0.0.1:$ci_pg_port changed during the run (started $ci_machine_state before, $now now): .ci/run never restarts or reconfigures it, so look for what did" >&2
    return 1
  fi
  echo "ci: the machine's PostgreSQL on 127.0.0.1:$ci_pg_port is as it was (started $now)"
}
