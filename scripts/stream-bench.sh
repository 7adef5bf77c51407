#!/usr/bin/env bash
# One large transaction committed while the consumer streams: for each
# size in SIZES (default "1000000 5000000" rows), native logical
# replication with streaming = on and pgsync run (protocol version 2,
# streaming on), each already caught up, then one INSERT of that many rows
# in one source transaction. Records the seconds from the source's COMMIT
# returning to the last row being on the target, the walsender's CPU
# seconds over the whole transaction (it decodes while the transaction
# runs), pgsync's peak RSS and the bytes it spooled. With PGSYNC_BASE set
# to another pgsync binary (e.g. a build from before streaming), that one
# runs too, interleaved. Writes bench-results/stream.json and stream-*.log.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
SIZES=${SIZES:-"1000000 5000000"}
RUNS=${RUNS:-1}
bench_setup

# walsender_pid APPLICATION_NAME
walsender_pid() { val_src postgres "SELECT pid FROM pg_stat_replication WHERE application_name = '$1'"; }
insert_big() { psql_src stream -c "INSERT INTO bench_a SELECT g, 'customer-' || g, g % 1000, g / 7.0, now(), repeat(md5(g::text), 2) FROM generate_series($1, $2) g"; }
# arrived DB ID: the row with that id is on the target.
arrived() { [ "$(val_tgt "$1" "SELECT count(*) FROM bench_a WHERE id = $2")" = 1 ]; }

# measure LABEL TARGET_DB APPNAME ROWS [PID_TO_SAMPLE]: one transaction,
# timed from COMMIT to arrival, with the walsender's CPU.
measure() {
  local label=$1 tdb=$2 app=$3 rows=$4 sample=${5:-} wpid c0 c1 t0 t1 first last
  first=$(( $(val_src stream "SELECT coalesce(max(id), 0) FROM bench_a") + 1 ))
  last=$((first + rows - 1))
  wpid=$(walsender_pid "$app")
  c0=$(proc_cpu "$wpid")
  insert_big "$first" "$last" >/dev/null
  t0=$(now)
  wait_for 3600 "$label to apply $rows rows" arrived "$tdb" "$last"
  t1=$(now)
  c1=$(proc_cpu "$wpid")
  m_secs=$(elapsed "$t0" "$t1")
  m_cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN { printf "%.2f", b - a }')
  echo "  $label: $rows rows applied ${m_secs}s after COMMIT; walsender CPU ${m_cpu}s"
}

runs=""
for rows in $SIZES; do
  for run in $(seq 1 "$RUNS"); do
    for who in native pgsync ${PGSYNC_BASE:+base}; do
      fresh_db stream
      psql_src stream -c "$TABLES_DDL" >/dev/null
      psql_tgt postgres -c "DROP DATABASE IF EXISTS stream_t WITH (FORCE)" -c "CREATE DATABASE stream_t" >/dev/null
      rss=null spool=null
      case "$who" in
        native)
          psql_src stream -c "CREATE PUBLICATION stream_native FOR TABLE bench_a" >/dev/null
          psql_tgt stream_t -c "$TABLES_DDL" >/dev/null
          psql_tgt stream_t -c "CREATE SUBSCRIPTION stream_native CONNECTION 'host=127.0.0.1 port=$SRC_PORT dbname=stream user=postgres' PUBLICATION stream_native WITH (copy_data = false, streaming = on)" >/dev/null
          wait_for 60 "native's walsender" bash -c "[ -n \"\$($bindir/psql -X -Atq -U postgres -h 127.0.0.1 -p $SRC_PORT -d postgres -c \"SELECT pid FROM pg_stat_replication WHERE application_name = 'stream_native'\")\" ]"
          measure native stream_t stream_native "$rows"
          drop_subscription stream_t stream_native
          psql_src stream -c "SELECT pg_drop_replication_slot('stream_native')" >/dev/null 2>&1 || true
          ;;
        pgsync|base)
          bin=$PGSYNC
          [ "$who" = base ] && bin=$PGSYNC_BASE
          write_config "$RESULTS/stream.toml" stream stream stream_t '"public.bench_a"'
          "$bin" -c "$RESULTS/stream.toml" bootstrap >/dev/null 2>"$RESULTS/stream-bootstrap.log"
          "$bin" -c "$RESULTS/stream.toml" run --log-every 1s 2>"$RESULTS/stream-$who-$rows.log" &
          rpid=$!
          sample_proc "$rpid" "$RESULTS/stream-$who-$rows-rss.csv" &
          wait_for 60 "pgsync's walsender" bash -c "[ -n \"\$($bindir/psql -X -Atq -U postgres -h 127.0.0.1 -p $SRC_PORT -d postgres -c \"SELECT pid FROM pg_stat_replication WHERE application_name LIKE 'pgsync%'\")\" ]"
          app=$(val_src postgres "SELECT application_name FROM pg_stat_replication WHERE application_name LIKE 'pgsync%' LIMIT 1")
          measure "$who" stream_t "$app" "$rows"
          kill -TERM "$rpid"; wait_exit "$rpid" 60 || true
          read -r _ rss _ < <(rss_stats "$RESULTS/stream-$who-$rows-rss.csv")
          spool=$( (grep -o "spool_bytes=[0-9]*" "$RESULTS/stream-$who-$rows.log" || true) | cut -d= -f2 | sort -n | tail -1)
          "$bin" -c "$RESULTS/stream.toml" teardown >/dev/null 2>&1 || true
          ;;
      esac
      runs="$runs${runs:+,}
    {\"who\": \"$who\", \"rows\": $rows, \"run\": $run, \"seconds_after_commit\": $m_secs, \"walsender_cpu_s\": $m_cpu, \"rss_peak_mb\": $rss, \"spool_bytes\": ${spool:-null}}"
    done
  done
done
psql_tgt postgres -c "DROP DATABASE IF EXISTS stream_t WITH (FORCE)" >/dev/null
cat >"$RESULTS/stream.json" <<JSON
{
  "benchmark": "stream",
  "command": "SIZES=\"$SIZES\" RUNS=$RUNS ${PGSYNC_BASE:+PGSYNC_BASE=$PGSYNC_BASE }scripts/stream-bench.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "runs": [$runs
  ]
}
JSON
cat "$RESULTS/stream.json"
