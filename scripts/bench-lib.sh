# Shared helpers of the benchmark scripts; sourced, not run.
# Every wait here is bounded; every process started is stopped by the
# caller's trap.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PGSYNC_PG_DIR=${PGSYNC_PG_DIR:-/tmp/pgsync-bench-pg}
export PGSYNC_SOURCE_PORT=${PGSYNC_SOURCE_PORT:-26562}
export PGSYNC_TARGET_PORT=${PGSYNC_TARGET_PORT:-26563}
# The scripts read pgsync's log lines as text (its default is JSON when
# stderr is not a terminal).
export PGSYNC_LOG_FORMAT=${PGSYNC_LOG_FORMAT:-text}
SRC_PORT=$PGSYNC_SOURCE_PORT
TGT_PORT=$PGSYNC_TARGET_PORT
RESULTS=${RESULTS:-$root/bench-results}
PGSYNC=${PGSYNC:-$root/bin/pgsync} # another build can be compared
mkdir -p "$RESULTS"

# bench_exit is the EXIT trap bench_setup sets: it ends the script's
# background jobs, runs BENCH_ON_EXIT (a script's own clean-up, when set)
# and stops the bench clusters, pass or fail. Their data stays: the next
# script starts them again.
bench_exit() {
  kill $(jobs -p) 2>/dev/null || true
  [ -z "${BENCH_ON_EXIT:-}" ] || eval "$BENCH_ON_EXIT" || true
  bash "$root/scripts/local-pg.sh" stop >/dev/null 2>&1 || true
}

bench_setup() {
  trap bench_exit EXIT
  bash "$root/scripts/install-pg.sh" >/dev/null
  (cd "$root" && make -s build)
  bash "$root/scripts/local-pg.sh" start >/dev/null
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1)
  [ -n "$bindir" ] || bindir=$(pg_config --bindir)
  PGVERSION=$("$bindir/postgres" --version | awk '{print $3}')
  # The commit the measured binary was built from (its version, set at
  # build time), not the checkout's HEAD when the script ends.
  PGSYNC_COMMIT=$("$PGSYNC" version | awk '{print $2}')
  [ -n "$PGSYNC_COMMIT" ] || { echo "bench: $PGSYNC version names no commit" >&2; exit 1; }
}

# psql_src DB [args...] / psql_tgt DB [args...]
psql_src() { local db=$1; shift; "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -h 127.0.0.1 -p "$SRC_PORT" -d "$db" "$@"; }
psql_tgt() { local db=$1; shift; "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -h 127.0.0.1 -p "$TGT_PORT" -d "$db" "$@"; }
val_src() { psql_src "$1" -Atc "$2"; }
val_tgt() { psql_tgt "$1" -Atc "$2"; }

# fresh_db NAME: drops NAME on both clusters (its slots and subscriptions
# first) and creates it empty.
fresh_db() {
  local db=$1
  for p in "$SRC_PORT" "$TGT_PORT"; do
    "$bindir/psql" -X -q -U postgres -h 127.0.0.1 -p "$p" -d postgres -v ON_ERROR_STOP=1 <<SQL >/dev/null
SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = '$db' AND active_pid IS NOT NULL;
SQL
    if [ "$(val_tgt postgres "SELECT count(*) FROM pg_database WHERE datname = '$db'")" = 1 ] && [ "$p" = "$TGT_PORT" ]; then
      for s in $(val_tgt "$db" "SELECT subname FROM pg_subscription WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())"); do
        drop_subscription "$db" "$s"
      done
    fi
    sleep 0.5
    "$bindir/psql" -X -q -U postgres -h 127.0.0.1 -p "$p" -d postgres -v ON_ERROR_STOP=1 <<SQL >/dev/null
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$db';
DROP DATABASE IF EXISTS $db WITH (FORCE);
CREATE DATABASE $db;
SQL
  done
}

# write_config FILE JOB SRC_DB TGT_DB [TABLES]: a job's configuration.
write_config() {
  cat >"$1" <<TOML
[source]
url = "postgres://postgres@127.0.0.1:$SRC_PORT/$3"
[target]
url = "postgres://postgres@127.0.0.1:$TGT_PORT/$4"
[job]
name = "$2"
tables = [${5:-\"public.*\"}]
${BENCH_TUNING:-}
TOML
}

# sample_proc PID CSV: a line every SAMPLE_SECONDS (default 0.25: a short
# phase gets samples too) with unix time, RSS kB and CPU % over the
# interval, until PID exits.
sample_proc() {
  local pid=$1 out=$2 hz every=${SAMPLE_SECONDS:-0.25} prev="" ticks rss
  hz=$(getconf CLK_TCK)
  echo "unix_s,rss_kb,cpu_pct" >"$out"
  while [ -r "/proc/$pid/stat" ]; do
    ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null) || break
    rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
    [ -n "$rss" ] || break
    awk -v t="$(date +%s.%N)" -v r="$rss" -v d="$(( ${prev:-$ticks} ))" -v n="$ticks" -v hz="$hz" -v e="$every" -v first="${prev:+no}" \
      'BEGIN { printf "%.3f,%d,%s\n", t, r, (first == "no" ? sprintf("%.0f", (n - d) * 100 / hz / e) : "") }' >>"$out"
    prev=$ticks
    sleep "$every"
  done
}

# wait_exit PID SECONDS: waits for PID (a child of this shell) and returns
# its status; after SECONDS it is killed and the wait fails.
wait_exit() {
  local pid=$1 limit=$2 watchdog rc=0
  ( sleep "$limit"; echo "bench: process $pid still running after ${limit}s, killed" >&2; kill -9 "$pid" ) 2>/dev/null &
  watchdog=$!
  wait "$pid" || rc=$?
  pkill -P "$watchdog" 2>/dev/null; kill "$watchdog" 2>/dev/null || true
  return $rc
}

# rss_stats CSV: prints "avg_mb peak_mb avg_cpu" of a sample file.
rss_stats() {
  awk -F, 'NR > 1 { n++; s += $2; if ($2 > p) p = $2; if ($3 != "") { c += $3; m++ } }
    END { if (n == 0) { print "0 0 0" } else { printf "%.1f %.1f %.0f\n", s / n / 1024, p / 1024, (m ? c / m : 0) } }' "$1"
}

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    if [ $SECONDS -ge $end ]; then
      echo "bench: timed out after ${limit}s waiting for $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

# children_cpu PORT: CPU seconds used so far by the ended children of the
# cluster's postmaster (backends and walsenders that have exited: read
# before and after a pgsync run, it gives its walsender's and its target
# backend's CPU).
children_cpu() {
  local dir
  dir=$("$bindir/psql" -X -Atq -U postgres -h 127.0.0.1 -p "$1" -d postgres -c "SHOW data_directory")
  awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($16 + $17) / hz}' "/proc/$(head -1 "$dir/postmaster.pid")/stat"
}

# cpu_delta PORT BEFORE: CPU seconds of the cluster's processes that ended
# since children_cpu returned BEFORE.
cpu_delta() { awk -v a="$2" -v b="$(children_cpu "$1")" 'BEGIN { printf "%.2f", b - a }'; }

# proc_cpu PID: CPU seconds used so far by a running process.
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "null"; else printf "%.2f", a / b }'; }

env_json() {
  cat <<JSON
  "environment": {
    "cpu": "$(awk -F: '/model name/ {gsub(/^ /, "", $2); print $2; exit}' /proc/cpuinfo)",
    "cores": $(nproc),
    "memory_gib": $(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo),
    "postgresql": "$PGVERSION",
    "pgsync_commit": "$PGSYNC_COMMIT",
    "go": "$(go env GOVERSION)"
  }
JSON
}

# The benchmark dataset: two tables of about 140 bytes of COPY text a row.
TABLES_DDL="
CREATE TABLE bench_a (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2),
  created timestamptz NOT NULL, note text);
CREATE TABLE bench_b (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2),
  created timestamptz NOT NULL, note text);"

# load_dataset DB ROWS: creates and fills both tables on the source.
load_dataset() {
  local db=$1 rows=$2
  psql_src "$db" <<SQL
$TABLES_DDL
CREATE SEQUENCE bench_ids START $((rows * 10));
INSERT INTO bench_a SELECT g, 'customer-' || (g % 100000), g % 1000, (g % 100000) / 7.0,
  '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second', repeat(md5(g::text), 2) FROM generate_series(1, $rows) g;
INSERT INTO bench_b SELECT g, 'customer-' || (g % 100000), g % 1000, (g % 100000) / 7.0,
  '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second', repeat(md5(g::text), 2) FROM generate_series(1, $rows) g;
VACUUM ANALYZE bench_a, bench_b;
SQL
}

# txn_script FILE ROWS CLIENTS INSERTS UPDATES DELETES: a pgbench script of
# one transaction. Each client updates and deletes in its own slice of the
# rows, so clients never wait for each other and every statement hits rows.
txn_script() {
  local file=$1 rows=$2 clients=$3 ins=$4 upd=$5 del=$6
  local slice=$((rows / clients))
  cat >"$file" <<SQL
\set lo (:client_id * $slice) + 1
\set u random(:lo, :lo + $slice - $upd - 1)
BEGIN;
INSERT INTO bench_b SELECT nextval('bench_ids'), 'customer-new', g, g * 1.5, now(), repeat('n', 64) FROM generate_series(1, $ins) g;
UPDATE bench_a SET qty = qty + 1, created = now() WHERE id BETWEEN :u AND :u + $upd - 1;
DELETE FROM bench_b WHERE id IN (SELECT id FROM bench_b WHERE id >= :lo AND id < :lo + $slice ORDER BY id LIMIT $del);
END;
SQL
}

# fresh_job NAME DDL: database NAME made anew on both clusters, DDL run on
# the source, and a job of the same name over it, configured in
# $RESULTS/NAME.toml (cfg) and bootstrapped (its log in
# $RESULTS/NAME-bootstrap.log).
fresh_job() {
  fresh_db "$1"
  psql_src "$1" -c "$2"
  cfg=$RESULTS/$1.toml
  write_config "$cfg" "$1" "$1" "$1"
  "$PGSYNC" -c "$cfg" bootstrap >/dev/null 2>"$RESULTS/$1-bootstrap.log"
}

# orchestrate NAME: a script that runs other bench scripts, whose figures
# name the commit, refuses a working tree with changes (bench-results/
# aside), and works from the repository's root.
orchestrate() {
  if [ -n "$(cd "$root" && git status --porcelain -- . ':!bench-results')" ]; then
    echo "$1: the working tree has changes; commit them so the figures name the code" >&2
    exit 2
  fi
  cd "$root"
}

# need NAME...: each named variable holds a measurement; a missing one ends
# the script, naming it (a zero in its place would be a figure).
need() {
  local v
  for v in "$@"; do
    [ -n "${!v:-}" ] || { echo "$(basename "$0"): no measurement for $v" >&2; exit 1; }
  done
}

# harness SCENARIO [flags...]: runs a scenario of the Go harness
# (scripts/bench/harness), which starts and stops the bench clusters itself
# and writes its typed result; PGSYNC, when set, names the build it
# measures.
# A relative PGSYNC is taken from the caller's directory; the default build
# (bin/pgsync) is left to the harness, which makes it.
harness() {
  local bin
  bin=$(realpath "$PGSYNC")
  [ "$bin" != "$(realpath "$root/bin/pgsync")" ] || bin=""
  (cd "$root/scripts/bench" && PGSYNC=$bin go run ./harness -root ../.. "$@")
}

# step MESSAGE: a timestamped progress line of an orchestrating script.
step() { echo "$(basename "$0" .sh): $(date -u +%H:%M:%S) $*"; }

# drop_subscription TGT_DB NAME: drops subscription NAME on the target,
# leaving its slot on the source to the caller.
drop_subscription() {
  psql_tgt "$1" -c "ALTER SUBSCRIPTION $2 DISABLE" -c "ALTER SUBSCRIPTION $2 SET (slot_name = NONE)" -c "DROP SUBSCRIPTION $2"
}

# lsn_ge_slot SLOT LSN: the slot's confirmed_flush_lsn reached LSN.
lsn_ge_slot() {
  [ "$(val_src postgres "SELECT coalesce(confirmed_flush_lsn >= '$2'::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = '$1'")" = t ]
}
