#!/usr/bin/env bash
# Starts, stops and reports two host-local PostgreSQL clusters for pgsync:
# a source (logical decoding on) and a target, both listening on 127.0.0.1
# and on a unix socket inside the directory this script owns.
#
#   scripts/local-pg.sh start|stop|status|destroy
#
# Environment: PGSYNC_PG_DIR (default /tmp/pgsync-local-pg),
# PGSYNC_SOURCE_PORT (55432), PGSYNC_TARGET_PORT (55433).
# As root the servers run as the 'postgres' OS user (initdb refuses root).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
dir=${PGSYNC_PG_DIR:-/tmp/pgsync-local-pg}
source_port=${PGSYNC_SOURCE_PORT:-55432}
target_port=${PGSYNC_TARGET_PORT:-55433}

bash "$here/install-pg.sh" >/dev/null
# shellcheck source=pg-conf.sh
. "$here/pg-conf.sh"
bindir=""
for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
  [ -x "$d/initdb" ] && { bindir=$d; break; }
done
[ -n "$bindir" ] || bindir=$(pg_config --bindir)

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

init_cluster() { # name port role
  local data="$dir/$1" port=$2 role=$3
  if [ ! -f "$data/PG_VERSION" ]; then
    as_owner "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/$1-initdb.log" 2>&1 ||
      { cat "$dir/$1-initdb.log" >&2; exit 1; }
    pg_cluster_conf "$port" "$dir" "$role" 15 >>"$data/postgresql.conf"
  fi
}

start_cluster() { # name port
  local data="$dir/$1" port=$2
  if as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    echo "local-pg: $1 already running on 127.0.0.1:$port"
  else
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "local-pg: port $port is taken by another server; stop it or choose other ports with PGSYNC_SOURCE_PORT/PGSYNC_TARGET_PORT" >&2
      exit 1
    fi
    # The port asked for wins over the one written at initdb: a cluster
    # directory made with other ports starts where it is asked to.
    as_owner "$bindir/pg_ctl" -D "$data" -o "-p $port" -l "$dir/$1.log" -w -t 60 start >/dev/null ||
      { tail -20 "$dir/$1.log" >&2; exit 1; }
    echo "local-pg: $1 started on 127.0.0.1:$port"
  fi
  for _ in $(seq 1 30); do
    "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" && break
    sleep 1
  done
  if ! "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -Atqc "SELECT 1 FROM pg_database WHERE datname='app'" postgres | grep -q 1; then
    "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -qc "CREATE DATABASE app" postgres
  fi
}

stop_cluster() { # name
  local data="$dir/$1"
  [ -f "$data/PG_VERSION" ] || return 0
  if as_owner "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop >/dev/null ||
      as_owner "$bindir/pg_ctl" -D "$data" -m immediate -w -t 30 stop >/dev/null
    echo "local-pg: $1 stopped"
  fi
}

case "${1:-}" in
  start)
    mkdir -p "$dir"
    chmod 0755 "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
    init_cluster source "$source_port" source
    init_cluster target "$target_port" target
    start_cluster source "$source_port"
    start_cluster target "$target_port"
    echo "local-pg: source postgres://postgres@127.0.0.1:$source_port/app"
    echo "local-pg: target postgres://postgres@127.0.0.1:$target_port/app"
    ;;
  stop)
    stop_cluster source
    stop_cluster target
    ;;
  destroy)
    stop_cluster source
    stop_cluster target
    rm -rf "$dir"
    ;;
  status)
    rc=0
    for c in source target; do
      if [ -f "$dir/$c/PG_VERSION" ] && as_owner "$bindir/pg_ctl" -D "$dir/$c" status >/dev/null 2>&1; then
        echo "local-pg: $c running"
      else
        echo "local-pg: $c not running"; rc=3
      fi
    done
    exit $rc
    ;;
  *)
    echo "usage: $0 start|stop|status|destroy" >&2
    exit 2
    ;;
esac
