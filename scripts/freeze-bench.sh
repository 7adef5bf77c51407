#!/usr/bin/env bash
# Tables that need no vacuum afterwards (issue 18): the first VACUUM
# (FREEZE) of a freshly moved database, its seconds and the WAL it writes,
# after three ways of loading the same two tables (ROWS rows each, default
# 4,000,000: the 1 GB dataset):
#   pgsync  pgsync bootstrap (COPY without FREEZE, keys built after)
#   plain   COPY ... TO STDOUT | COPY ... FROM STDIN into a table emptied
#           in the same transaction, without FREEZE
#   frozen  the same pipe with COPY ... FROM STDIN (FREEZE)
# Each load's seconds too: FREEZE may cost the load what it saves the
# vacuum. A CHECKPOINT comes before each vacuum, as the first autovacuum of
# a moved database usually runs after one. Writes bench-results/freeze.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
ROWS=${ROWS:-4000000}
bench_setup

DB=freeze_source # FREEZE is a keyword: no database is named so
fresh_db $DB
for db in freeze_plain freeze_frozen; do
  psql_tgt postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db" >/dev/null
done
load_dataset $DB "$ROWS" >/dev/null
cfg=$RESULTS/freeze.toml
write_config "$cfg" freeze $DB $DB
settle $DB >/dev/null

# vacuum_freeze DB: v_secs and v_wal of VACUUM (FREEZE) of both tables.
vacuum_freeze() {
  local db=$1 l0 l1 t0 t1
  psql_tgt "$db" -c "CHECKPOINT" >/dev/null
  l0=$(val_tgt "$db" "SELECT pg_current_wal_lsn()")
  t0=$(now)
  psql_tgt "$db" -c "VACUUM (FREEZE) bench_a, bench_b" >/dev/null
  t1=$(now)
  l1=$(val_tgt "$db" "SELECT pg_current_wal_lsn()")
  v_secs=$(elapsed "$t0" "$t1")
  v_wal=$(val_tgt "$db" "SELECT pg_wal_lsn_diff('$l1', '$l0')::bigint")
}

# pipe_load DB OPTIONS: both tables in parallel, each emptied and loaded in
# one target transaction; l_secs.
pipe_load() {
  local db=$1 opts=$2 t0 t1
  psql_tgt "$db" -c "$TABLES_DDL" >/dev/null
  t0=$(now)
  local pipes=""
  for t in bench_a bench_b; do
    ( psql_src $DB -c "COPY $t TO STDOUT" |
      psql_tgt "$db" -c "BEGIN" -c "TRUNCATE $t" -c "COPY $t FROM STDIN $opts" -c "COMMIT" >/dev/null ) &
    pipes="$pipes $!"
  done
  # shellcheck disable=SC2086
  wait $pipes
  t1=$(now)
  l_secs=$(elapsed "$t0" "$t1")
}

runs=""
add_run() { runs="$runs${runs:+,}
    {\"who\": \"$1\", \"load_seconds\": $2, \"vacuum_freeze_seconds\": $3, \"vacuum_freeze_wal_bytes\": $4}"; }

echo "freeze: pgsync bootstrap"
t0=$(now)
"$PGSYNC" -c "$cfg" bootstrap >"$RESULTS/freeze-bootstrap.log" 2>&1
t1=$(now)
load=$(elapsed "$t0" "$t1")
vacuum_freeze $DB
echo "  pgsync: load ${load}s; VACUUM (FREEZE) ${v_secs}s, $v_wal bytes of WAL"
add_run pgsync "$load" "$v_secs" "$v_wal"
"$PGSYNC" -c "$cfg" teardown >/dev/null 2>&1 || true

for who in plain frozen; do
  opts=""
  [ "$who" = frozen ] && opts="(FREEZE)"
  psql_tgt postgres -c "CHECKPOINT" >/dev/null
  echo "freeze: COPY pipe $opts"
  pipe_load "freeze_$who" "$opts"
  vacuum_freeze "freeze_$who"
  echo "  $who: load ${l_secs}s; VACUUM (FREEZE) ${v_secs}s, $v_wal bytes of WAL"
  add_run "$who" "$l_secs" "$v_secs" "$v_wal"
done

cat >"$RESULTS/freeze.json" <<JSON
{
  "benchmark": "freeze",
  "command": "ROWS=$ROWS scripts/freeze-bench.sh",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
  "rows_per_table": $ROWS,
$(env_json),
  "runs": [$runs
  ]
}
JSON
cat "$RESULTS/freeze.json"
