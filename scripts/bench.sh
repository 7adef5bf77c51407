#!/usr/bin/env bash
# Initial copy and continuous replication (see docs/benchmarks.md).
#   DATASET=100MB|1GB (2 x 400k or 2 x 4M rows, ~140 bytes of COPY text a row)
#   CDC_SECONDS=60    (4 pgbench writers, 20 updates + 30 inserts + 5 deletes a txn)
# Times pgsync bootstrap beside a native subscription's initial copy and a
# plain COPY TO STDOUT | COPY FROM STDIN pipe, then pgsync run under load.
#   RTT_MS=N          (bench-lib.sh) pgsync, native's subscriber and the
#                     pipe's reading side reach the source through
#                     scripts/latency-proxy with an N ms round trip; the
#                     writers do not; the JSON then has "rtt_ms"
# Writes bench-results/bench-<dataset>-*.{csv,log,svg,txt} and bench-<dataset>.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
DATASET=${DATASET:-100MB}
CDC_SECONDS=${CDC_SECONDS:-60}
CLIENTS=4
case "$DATASET" in
  100MB) ROWS=400000 ;;
  1GB) ROWS=4000000 ;;
  *) echo "bench: DATASET must be 100MB or 1GB" >&2; exit 2 ;;
esac
tag=bench-$(echo "$DATASET" | tr 'A-Z' 'a-z')
bench_setup
start_latency_proxy

echo "bench: $DATASET dataset ($ROWS rows a table)"
fresh_db bench
for db in bench_native bench_pipe; do psql_tgt postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"; done
load_dataset bench "$ROWS"
source_bytes=$(val_src bench "SELECT pg_total_relation_size('bench_a') + pg_total_relation_size('bench_b')")
cfg=$RESULTS/$tag.toml
write_config "$cfg" bench bench bench
settle bench

echo "bench: pgsync bootstrap"
s0=$(children_cpu "$SRC_PORT") g0=$(children_cpu "$TGT_PORT")
sampled_run "$tag-bootstrap" "$PGSYNC" -c "$cfg" bootstrap
sleep 0.5
snap_src_cpu=$(cpu_delta "$SRC_PORT" "$s0") snap_tgt_cpu=$(cpu_delta "$TGT_PORT" "$g0")
snap_secs=$run_secs snap_rss_avg=$run_rss_avg snap_rss_peak=$run_rss_peak snap_cpu=$run_cpu
copy_bytes=$(sed -n 's/.*msg="bootstrap done".* bytes=\([0-9]*\).*/\1/p' "$RESULTS/$tag-bootstrap.log")
settle bench

echo "bench: plain COPY pipe, two tables in parallel"
psql_tgt bench_pipe -c "$TABLES_DDL"
t0=$(now)
pipes=""
for t in bench_a bench_b; do
  ( SRC_PORT=$SRC_VIA_PORT psql_src bench -c "COPY $t TO STDOUT" | psql_tgt bench_pipe -c "COPY $t FROM STDIN" ) &
  pipes="$pipes $!"
done
# The pipes only: with RTT_MS the latency proxy is a job of this shell too.
# shellcheck disable=SC2086
wait $pipes
t1=$(now)
pipe_secs=$(elapsed "$t0" "$t1")
settle bench

echo "bench: native subscription initial copy"
timed_native bench bench_native native_bench native_subscribe bench bench_native native_bench
settle bench

echo "bench: pgsync run while $CLIENTS writers commit for ${CDC_SECONDS}s"
"$PGSYNC" -c "$cfg" run --log-every 1s 2>"$RESULTS/$tag-cdc-pgsync.log" &
pid=$!
sample_proc "$pid" "$RESULTS/$tag-cdc-rss.csv" &
sampler=$!
txn_script "$RESULTS/$tag-txn.sql" "$ROWS" "$CLIENTS" 30 20 5
"$bindir/pgbench" -n -h 127.0.0.1 -p "$SRC_PORT" -U postgres -c "$CLIENTS" -T "$CDC_SECONDS" \
  -f "$RESULTS/$tag-txn.sql" bench >"$RESULTS/$tag-pgbench.log" 2>&1
stop=$(now)
head=$(val_src bench "SELECT pg_current_wal_lsn()")
offered=$(awk '/number of transactions actually processed/ {split($6, a, "/"); print a[1]}' "$RESULTS/$tag-pgbench.log")
wait_for 600 "pgsync to drain" lsn_ge_slot pgsync_bench "$head"
drained=$(now)
drain_secs=$(elapsed "$stop" "$drained")
kill -TERM "$pid"
wait_exit "$pid" 60 || true
wait_exit "$sampler" 60 || true
txns=$(sed -n 's/.*msg=stopped.* txns=\([0-9]*\).*/\1/p' "$RESULTS/$tag-cdc-pgsync.log" | tail -1)
rows=$(sed -n 's/.*msg=stopped.* rows=\([0-9]*\).*/\1/p' "$RESULTS/$tag-cdc-pgsync.log" | tail -1)
read -r cdc_rss_avg cdc_rss_peak cdc_cpu < <(rss_stats "$RESULTS/$tag-cdc-rss.csv")
if "$PGSYNC" -c "$cfg" verify >"$RESULTS/$tag-verify.txt"; then match=true; else match=false; fi

need copy_bytes offered txns rows
cat >"$RESULTS/$tag.json" <<JSON
{
  "benchmark": "bench",
  "command": "DATASET=$DATASET CDC_SECONDS=$CDC_SECONDS scripts/bench.sh",$(rtt_json)
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "rows_per_table": $ROWS,
  "source_bytes_on_disk": $source_bytes,
  "snapshot": {
    "pgsync_seconds": $snap_secs,
    "copy_bytes": ${copy_bytes},
    "pgsync_mb_per_s": $(ratio "$(awk -v b="${copy_bytes}" 'BEGIN {print b / 1e6}')" "$snap_secs"),
    "pgsync_rss_avg_mb": $snap_rss_avg,
    "pgsync_rss_peak_mb": $snap_rss_peak,
    "pgsync_cpu_avg_pct": $snap_cpu,
    "pgsync_server_cpu_seconds": {"source": $snap_src_cpu, "target": $snap_tgt_cpu},
    "native_subscription_seconds": $native_secs,
    "native_server_cpu_seconds": {"source": $native_src_cpu, "target": $native_tgt_cpu},
    "copy_pipe_seconds": $pipe_secs,
    "pgsync_speedup_vs_native": $(ratio "$native_secs" "$snap_secs"),
    "pgsync_speedup_vs_pipe": $(ratio "$pipe_secs" "$snap_secs")
  },
  "cdc": {
    "seconds": $CDC_SECONDS,
    "writers": $CLIENTS,
    "transactions_committed": ${offered},
    "transactions_applied": ${txns},
    "rows_applied": ${rows},
    "txn_per_s": $(ratio "${txns}" "$CDC_SECONDS"),
    "rows_per_s": $(ratio "${rows}" "$CDC_SECONDS"),
    "drain_seconds_after_writers_stop": $drain_secs,
    "rss_avg_mb": $cdc_rss_avg,
    "rss_peak_mb": $cdc_rss_peak,
    "cpu_avg_pct": $cdc_cpu
  },
  "hashes_match": $match
}
JSON
cat "$RESULTS/$tag.json"
