#!/usr/bin/env bash
# Installs PostgreSQL 15 (server, client, pgbench) when it is missing.
# On Debian/Ubuntu it uses apt-get; elsewhere it says what to install.
set -euo pipefail

pg_bindir() {
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/pgbench" ] && { echo "$d"; return 0; }
  done
  if command -v pg_config >/dev/null 2>&1; then
    d=$(pg_config --bindir)
    [ -x "$d/initdb" ] && [ -x "$d/pgbench" ] && { echo "$d"; return 0; }
  fi
  return 1
}

if d=$(pg_bindir); then
  echo "install-pg: PostgreSQL found in $d"
  exit 0
fi

if command -v apt-get >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-pg: PostgreSQL 15 is missing; run as root or: sudo apt-get install -y postgresql-15 postgresql-client-15" >&2
    exit 1
  fi
  echo "install-pg: installing postgresql-15 with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 apt-get update -qq
  timeout 900 apt-get install -y -qq postgresql-15 postgresql-client-15 >/dev/null
  # Debian's package starts a cluster on 5432; pgsync's clusters do not need it.
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster 15 main stop >/dev/null 2>&1 || true
  fi
  d=$(pg_bindir) || { echo "install-pg: apt-get finished but initdb/pgbench are still missing" >&2; exit 1; }
  echo "install-pg: PostgreSQL installed in $d"
  exit 0
fi

echo "install-pg: PostgreSQL 15 server binaries (initdb, pg_ctl, pgbench) not found; install PostgreSQL 15 (e.g. 'brew install postgresql@15' or your distribution's postgresql-15 package) and put its bin directory on PATH" >&2
exit 1
