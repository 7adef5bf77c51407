#!/usr/bin/env bash
# Runs pgsync on each bad input an operator can give it and records the exit
# status and the exact last line printed, as a Markdown table in
# bench-results/bad-inputs.md (docs/reliability.md quotes it). Fails when a
# line holds the password used, or when an exit status is not the
# documented one (2 for configuration errors, 1 for the rest).
set -euo pipefail
export PGSYNC_PG_DIR=${PGSYNC_PG_DIR:-/tmp/pgsync-badinput-pg}
export PGSYNC_SOURCE_PORT=${PGSYNC_SOURCE_PORT:-61432}
export PGSYNC_TARGET_PORT=${PGSYNC_TARGET_PORT:-61433}
source "$(dirname "$0")/lib.sh"
drill_setup
trap 'bash "$root/scripts/local-pg.sh" destroy >/dev/null 2>&1 || true' EXIT
work=$(mktemp -d)
out=$RESULTS/bad-inputs.md
SECRET=Wr0ngPa55word

fresh_db bad
psql_src bad -c "CREATE TABLE t (id int PRIMARY KEY, code varchar(20)); CREATE TABLE nokey (a int); CREATE TABLE wide (id int PRIMARY KEY, code varchar(40))"
psql_src postgres -c "DROP ROLE IF EXISTS pw_user; CREATE ROLE pw_user LOGIN PASSWORD 'right-one'; DROP ROLE IF EXISTS norepl; CREATE ROLE norepl LOGIN"
# password authentication for pw_user (the clusters trust everyone else)
hba=$PGSYNC_PG_DIR/source/pg_hba.conf
grep -q pw_user "$hba" || sed -i '1i host all pw_user 127.0.0.1/32 scram-sha-256' "$hba"
psql_src postgres -c "SELECT pg_reload_conf()" >/dev/null
psql_tgt bad -c "CREATE TABLE wide (id int PRIMARY KEY, code varchar(10))"

src="postgres://postgres@127.0.0.1:$SRC_PORT/bad"
tgt="postgres://postgres@127.0.0.1:$TGT_PORT/bad"
config() { # config FILE JOB TABLES [SOURCE_URL] [TARGET_URL] [EXTRA]
  cat >"$1" <<TOML
[source]
url = "${4:-$src}"
[target]
url = "${5:-$tgt}"
[job]
name = "$2"
tables = [$3]
${6:-}
TOML
}

rows=""
case_() { # case_ DESCRIPTION WANT_EXIT COMMAND...
  local what=$1 want=$2 rc=0 line
  shift 2
  line=$("$@" 2>&1 >/dev/null | tail -1) || rc=$? # pipefail: pgsync's status
  case "$line" in *"$SECRET"*) echo "bad-inputs: $what: the password appears in: $line" >&2; exit 1 ;; esac
  if [ "$rc" != "$want" ]; then echo "bad-inputs: $what: exit $rc, want $want: $line" >&2; exit 1; fi
  rows="$rows| $what | $rc | \`${line//|/\\|}\` |
"
  echo "bad-inputs: $what: exit $rc"
}

case_ "missing config file" 2 "$PGSYNC" -c "$work/none.toml" status
echo "[job]" >"$work/unreadable.toml"; chmod 000 "$work/unreadable.toml"
if [ "$(id -u)" != 0 ]; then case_ "unreadable config file" 2 "$PGSYNC" -c "$work/unreadable.toml" status; fi
printf '[source]\nurl = "%s"\n[job\nname = "x"\n' "$src" >"$work/syntax.toml"
case_ "TOML syntax error" 2 "$PGSYNC" -c "$work/syntax.toml" status
config "$work/unknown.toml" j '"public.t"' "" "" $'[tuning]\nmax_inflight = "1MiB"'
case_ "unknown key" 2 "$PGSYNC" -c "$work/unknown.toml" status
config "$work/size.toml" j '"public.t"' "" "" $'[tuning]\nmax_inflight_bytes = "16 parsecs"'
case_ "bad size" 2 "$PGSYNC" -c "$work/size.toml" status
config "$work/empty.toml" j ''
case_ "empty table list" 2 "$PGSYNC" -c "$work/empty.toml" status
config "$work/jobname.toml" 'Bad-Name' '"public.t"'
case_ "invalid job name" 2 "$PGSYNC" -c "$work/jobname.toml" status
config "$work/nomatch.toml" j1 '"public.nothing_*"'
case_ "no table matched" 1 "$PGSYNC" -c "$work/nomatch.toml" bootstrap
config "$work/unreachable.toml" j2 '"public.t"' "postgres://postgres@127.0.0.1:1/bad"
case_ "unreachable host (refused port)" 1 "$PGSYNC" -c "$work/unreachable.toml" status
config "$work/password.toml" j3 '"public.t"' "postgres://pw_user:$SECRET@127.0.0.1:$SRC_PORT/bad"
case_ "wrong password" 1 "$PGSYNC" -c "$work/password.toml" status
config "$work/norepl.toml" j4 '"public.t"' "postgres://norepl@127.0.0.1:$SRC_PORT/bad"
case_ "source user without REPLICATION" 1 "$PGSYNC" -c "$work/norepl.toml" bootstrap
config "$work/nokey.toml" j5 '"public.nokey"'
case_ "table without replica identity" 1 "$PGSYNC" -c "$work/nokey.toml" bootstrap
config "$work/narrow.toml" j6 '"public.wide"'
case_ "target column too narrow" 1 "$PGSYNC" -c "$work/narrow.toml" bootstrap
psql_tgt bad -c "DROP TABLE wide; CREATE TABLE wide (id int PRIMARY KEY)"
case_ "target column missing" 1 "$PGSYNC" -c "$work/narrow.toml" bootstrap
config "$work/ok.toml" j7 '"public.t"'
"$PGSYNC" -c "$work/ok.toml" bootstrap >/dev/null 2>&1
case_ "a second bootstrap" 1 "$PGSYNC" -c "$work/ok.toml" bootstrap
"$PGSYNC" -c "$work/ok.toml" teardown >/dev/null 2>&1
# wal_level: the target cluster, restarted with wal_level = replica, as a source
psql_tgt postgres -c "ALTER SYSTEM SET wal_level = replica" >/dev/null
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
as_pg "$bindir/pg_ctl" -D "$PGSYNC_PG_DIR/target" -m fast -w restart -l "$PGSYNC_PG_DIR/target.log" >/dev/null
psql_tgt bad -c "CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, code varchar(20))"
config "$work/wal.toml" j8 '"public.t"' "postgres://postgres@127.0.0.1:$TGT_PORT/bad" "$src"
case_ "wal_level not logical" 1 "$PGSYNC" -c "$work/wal.toml" bootstrap
psql_tgt postgres -c "ALTER SYSTEM RESET wal_level" >/dev/null

{
  echo "| input | exit | the line pgsync prints |"
  echo "|---|---|---|"
  printf '%s' "$rows"
} >"$out"
cat "$out"
