# Shared helpers of the reliability drills (faults.sh, soak.sh,
# bad-inputs.sh); sourced, not run. The benchmarks are scenarios of the Go
# harness (scripts/bench/harness); these drills check behaviour, not
# speed, and each runs on clusters of its own (the caller sets
# PGSYNC_PG_DIR and the ports before sourcing). Every wait here is
# bounded; every process started is stopped by the caller's trap.

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${PGSYNC_PG_DIR:?set by the drill}" "${PGSYNC_SOURCE_PORT:?set by the drill}" "${PGSYNC_TARGET_PORT:?set by the drill}"
export PGSYNC_PG_DIR PGSYNC_SOURCE_PORT PGSYNC_TARGET_PORT
# The drills read pgsync's log lines as text (its default is JSON when
# stderr is not a terminal).
export PGSYNC_LOG_FORMAT=${PGSYNC_LOG_FORMAT:-text}
SRC_PORT=$PGSYNC_SOURCE_PORT
TGT_PORT=$PGSYNC_TARGET_PORT
RESULTS=${RESULTS:-$root/bench-results}
PGSYNC=${PGSYNC:-$root/bin/pgsync} # another build can be compared
mkdir -p "$RESULTS"

# drill_exit is the EXIT trap drill_setup sets: it ends the script's
# background jobs, runs DRILL_ON_EXIT (a script's own clean-up, when set)
# and stops the bench clusters, pass or fail. Their data stays: the next
# script starts them again.
drill_exit() {
  kill $(jobs -p) 2>/dev/null || true
  [ -z "${DRILL_ON_EXIT:-}" ] || eval "$DRILL_ON_EXIT" || true
  bash "$root/scripts/local-pg.sh" stop >/dev/null 2>&1 || true
}

drill_setup() {
  trap drill_exit EXIT
  bash "$root/scripts/install-pg.sh" >/dev/null
  (cd "$root" && make -s build)
  bash "$root/scripts/local-pg.sh" start >/dev/null
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1)
  [ -n "$bindir" ] || bindir=$(pg_config --bindir)
  PGVERSION=$("$bindir/postgres" --version | awk '{print $3}')
  # The commit the measured binary was built from (its version, set at
  # build time), not the checkout's HEAD when the script ends.
  PGSYNC_COMMIT=$("$PGSYNC" version | awk '{print $2}')
  [ -n "$PGSYNC_COMMIT" ] || { echo "drill: $PGSYNC version names no commit" >&2; exit 1; }
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
${DRILL_TUNING:-}
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
  ( sleep "$limit"; echo "drill: process $pid still running after ${limit}s, killed" >&2; kill -9 "$pid" ) 2>/dev/null &
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
      echo "drill: timed out after ${limit}s waiting for $what" >&2
      return 1
    fi
    sleep 0.2
  done
}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

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

# The drills' dataset: two tables of about 140 bytes of COPY text a row.
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

# need NAME...: each named variable holds a measurement; a missing one ends
# the script, naming it (a zero in its place would be a figure).
need() {
  local v
  for v in "$@"; do
    [ -n "${!v:-}" ] || { echo "$(basename "$0"): no measurement for $v" >&2; exit 1; }
  done
}

# drop_subscription TGT_DB NAME: drops subscription NAME on the target,
# leaving its slot on the source to the caller.
drop_subscription() {
  psql_tgt "$1" -c "ALTER SUBSCRIPTION $2 DISABLE" -c "ALTER SUBSCRIPTION $2 SET (slot_name = NONE)" -c "DROP SUBSCRIPTION $2"
}

# lsn_ge_slot SLOT LSN: the slot's confirmed_flush_lsn reached LSN.
lsn_ge_slot() {
  [ "$(val_src postgres "SELECT coalesce(confirmed_flush_lsn >= '$2'::pg_lsn, false) FROM pg_replication_slots WHERE slot_name = '$1'")" = t ]
}
