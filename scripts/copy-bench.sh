#!/usr/bin/env bash
# Initial copy of ONE large table: pgsync bootstrap with 1, 2 and 4 COPY
# streams (the table cut into tuning.copy_range_mb ranges of heap blocks),
# beside a native subscription (one table sync worker per table) and a
# plain COPY TO STDOUT | COPY FROM STDIN pipe.
#   ROWS=8000000   (about 123 bytes of COPY text a row: 0.98 GB)
#   STREAMS="1 2 4"
#   TABLES=1       (2: the rows split over two tables, as bench.sh has them)
#   COMPARE=1      (0: pgsync only, for the memory check of a 10 GB copy)
# Both clusters get max_wal_size = 8GB for the run (reset at the end), so
# that checkpoints forced by WAL volume do not land in one contender's run
# and not another's.
# Records the time, pgsync's RSS and CPU, and the CPU seconds of each
# server's processes that ended with the copy (the COPY backends, the
# native table sync worker and its walsender).
# Writes bench-results/copy-*.{csv,log} and copy.json (RESULT_NAME=copy).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
ROWS=${ROWS:-8000000}
STREAMS=${STREAMS:-"1 2 4"}
TABLES=${TABLES:-1}
COMPARE=${COMPARE:-1}
bench_setup
reset_wal() { for p in "$SRC_PORT" "$TGT_PORT"; do "$bindir/psql" -X -q -U postgres -h 127.0.0.1 -p "$p" -d postgres -c "ALTER SYSTEM RESET max_wal_size" -c "SELECT pg_reload_conf()" >/dev/null || true; done; }
BENCH_ON_EXIT=reset_wal
for p in "$SRC_PORT" "$TGT_PORT"; do
  "$bindir/psql" -X -q -U postgres -h 127.0.0.1 -p "$p" -d postgres -c "ALTER SYSTEM SET max_wal_size = '8GB'" -c "SELECT pg_reload_conf()" >/dev/null
done

case "$TABLES" in
  1) names="bench_a" ;;
  2) names="bench_a bench_b" ;;
  *) echo "copy-bench: TABLES must be 1 or 2" >&2; exit 2 ;;
esac
DDL=""
for t in $names; do
  DDL="$DDL CREATE TABLE $t (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2),
  created timestamptz NOT NULL, note text);"
done

echo "copy-bench: $ROWS rows in $TABLES table(s)"
fresh_db copysrc
psql_src copysrc -c "$DDL"
per_table=$((ROWS / TABLES))
for t in $names; do
  psql_src copysrc -c "INSERT INTO $t SELECT g, 'customer-' || (g % 100000), g % 1000, (g % 100000) / 7.0,
  '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second', repeat(md5(g::text), 2) FROM generate_series(1, $per_table) g" \
    -c "VACUUM ANALYZE $t"
done
source_bytes=$(val_src copysrc "SELECT sum(pg_relation_size(c.oid)) FROM pg_class c WHERE relname IN ('bench_a', 'bench_b') AND relkind = 'r'")

settle_copy() { psql_src copysrc -c "CHECKPOINT" >/dev/null; psql_tgt postgres -c "CHECKPOINT" >/dev/null; }


runs=""
for n in $STREAMS; do
  echo "copy-bench: pgsync bootstrap, $n stream(s)"
  psql_tgt postgres -c "DROP DATABASE IF EXISTS copy_$n WITH (FORCE)" -c "CREATE DATABASE copy_$n"
  cfg=$RESULTS/copy-$n.toml
  BENCH_TUNING="[tuning]
max_parallel_copies = $n" write_config "$cfg" "copy$n" copysrc "copy_$n"
  settle_copy
  s0=$(children_cpu "$SRC_PORT") g0=$(children_cpu "$TGT_PORT")
  sampled_run "copy-$n-bootstrap" "$PGSYNC" -c "$cfg" bootstrap
  sleep 0.5
  src_cpu=$(cpu_delta "$SRC_PORT" "$s0") tgt_cpu=$(cpu_delta "$TGT_PORT" "$g0")
  bytes=$(sed -n 's/.*msg="bootstrap done".* bytes=\([0-9]*\).*/\1/p' "$RESULTS/copy-$n-bootstrap.log")
  parts=$(sed -n 's/.*msg="table copied".* parts=\([0-9]*\).*/\1/p' "$RESULTS/copy-$n-bootstrap.log" | awk '{ s += $1 } END { print s + 0 }')
  need bytes parts
  if "$PGSYNC" -c "$cfg" verify >"$RESULTS/copy-$n-verify.txt"; then match=true; else match=false; fi
  "$PGSYNC" -c "$cfg" teardown >/dev/null 2>&1
  psql_tgt postgres -c "DROP DATABASE copy_$n WITH (FORCE)" >/dev/null
  runs="$runs${runs:+,}
    {\"streams\": $n, \"seconds\": $run_secs, \"copy_bytes\": ${bytes}, \"parts\": ${parts},
     \"mb_per_s\": $(ratio "$(awk -v b="${bytes}" 'BEGIN {print b / 1e6}')" "$run_secs"),
     \"rss_avg_mb\": $run_rss_avg, \"rss_peak_mb\": $run_rss_peak, \"pgsync_cpu_avg_pct\": $run_cpu,
     \"source_cpu_seconds\": $src_cpu, \"target_cpu_seconds\": $tgt_cpu, \"hashes_match\": $match}"
  eval "secs_$n=$run_secs"
done

pipe_secs=null binary_pipe_secs=null native_secs=null native_src_cpu=null native_tgt_cpu=null
if [ "$COMPARE" = 1 ]; then
  # pipe NAME FORMAT: each table through psql | psql, the tables in parallel.
  pipe() {
    local t0 t1
    psql_tgt postgres -c "DROP DATABASE IF EXISTS copy_pipe WITH (FORCE)" -c "CREATE DATABASE copy_pipe" >/dev/null
    psql_tgt copy_pipe -c "$DDL"
    settle_copy
    t0=$(now)
    for t in $names; do
      ( psql_src copysrc -c "COPY $t TO STDOUT $2" | psql_tgt copy_pipe -c "COPY $t FROM STDIN $2" ) &
    done
    wait
    t1=$(now)
    printf -v "$1" %s "$(elapsed "$t0" "$t1")"
    psql_tgt postgres -c "DROP DATABASE copy_pipe WITH (FORCE)" >/dev/null
  }
  echo "copy-bench: plain COPY pipe, text and binary"
  pipe pipe_secs ""
  pipe binary_pipe_secs "(FORMAT binary)"

  echo "copy-bench: native subscription initial copy"
  psql_tgt postgres -c "DROP DATABASE IF EXISTS copy_native WITH (FORCE)" -c "CREATE DATABASE copy_native"
  psql_tgt copy_native -c "$DDL"
  psql_src copysrc -c "CREATE PUBLICATION native_copy FOR TABLE $(echo $names | tr ' ' ',')"
  settle_copy
  subscribe_copy() {
    psql_tgt copy_native -c "CREATE SUBSCRIPTION native_copy CONNECTION 'host=127.0.0.1 port=$SRC_PORT dbname=copysrc user=postgres' PUBLICATION native_copy WITH (copy_data = true)"
    wait_for 3600 "native initial copy" bash -c "[ \"\$($bindir/psql -X -Atq -U postgres -h 127.0.0.1 -p $TGT_PORT -d copy_native -c \"SELECT count(*) FILTER (WHERE srsubstate = 'r') FROM pg_subscription_rel\")\" = $TABLES ]"
  }
  timed_native copysrc copy_native native_copy subscribe_copy
  psql_tgt postgres -c "DROP DATABASE copy_native WITH (FORCE)" >/dev/null
fi

best=$(for n in $STREAMS; do v="secs_$n"; echo "${!v}"; done | sort -n | head -1)
cat >"$RESULTS/${RESULT_NAME:-copy}.json" <<JSON
{
  "benchmark": "copy",
  "command": "ROWS=$ROWS TABLES=$TABLES COMPARE=$COMPARE STREAMS=\"$STREAMS\" scripts/copy-bench.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "rows": $ROWS,
  "tables": $TABLES,
  "heap_bytes": $source_bytes,
  "pgsync": [$runs
  ],
  "native_subscription": {"seconds": $native_secs, "source_cpu_seconds": $native_src_cpu, "target_cpu_seconds": $native_tgt_cpu},
  "copy_pipe_seconds": $pipe_secs,
  "binary_copy_pipe_seconds": $binary_pipe_secs,
  "pgsync_best_seconds": $best,
  "pgsync_best_speedup_vs_native": $([ "$COMPARE" = 1 ] && ratio "$native_secs" "$best" || echo null),
  "pgsync_best_speedup_vs_pipe": $([ "$COMPARE" = 1 ] && ratio "$pipe_secs" "$best" || echo null)
}
JSON
cat "$RESULTS/${RESULT_NAME:-copy}.json"
