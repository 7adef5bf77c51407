#!/usr/bin/env bash
# Catch-up throughput: with the job bootstrapped and stopped, a backlog of
# BACKLOG_TXNS committed transactions (100 inserts + 10 updates + 5 deletes
# each) is applied by `pgsync run --until-caught-up`, then the same backlog
# by a native subscription that was disabled while it was written. The
# floor is measured on the same backlog: a consumer that reads and discards
# the stream (scripts/discard), and the server's decoding alone (peek).
# The CPU seconds of pgsync, its walsender and its target backend, and of
# the native walsender and apply worker, go in the JSON.
# RTT_MS=N (bench-lib.sh) puts scripts/latency-proxy with an N ms round
# trip in front of the source for pgsync, native's subscriber and the
# floor's reader alike; the JSON then has "rtt_ms".
# Writes bench-results/catchup-*.{csv,log,svg} and catchup.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
BACKLOG_TXNS=${BACKLOG_TXNS:-5000}
ROWS=${ROWS:-200000}
CLIENTS=4
bench_setup
start_latency_proxy

echo "catchup-bench: fresh databases, $ROWS rows a table"
fresh_db catchup
fresh_db catchup_native
psql_tgt postgres -c "DROP DATABASE IF EXISTS catchup_native WITH (FORCE)" -c "CREATE DATABASE catchup_native"
load_dataset catchup "$ROWS"
cfg=$RESULTS/catchup.toml
write_config "$cfg" catchup catchup catchup
"$PGSYNC" -c "$cfg" bootstrap >/dev/null 2>"$RESULTS/catchup-bootstrap.log"
native_subscribe catchup catchup_native native_catchup
psql_tgt catchup_native -c "ALTER SUBSCRIPTION native_catchup DISABLE"
wait_for 60 "native slot to go idle" bash -c "[ \"\$($bindir/psql -X -Atq -U postgres -h 127.0.0.1 -p $SRC_PORT -d postgres -c \"SELECT active FROM pg_replication_slots WHERE slot_name = 'native_catchup'\")\" = f ]"

# Two more slots at the same point measure the floor: one is streamed by
# a consumer that reads and discards (scripts/discard), the other is
# decoded inside the server (pg_logical_slot_peek_binary_changes).
psql_src catchup -c "SELECT pg_create_logical_replication_slot('decode_probe', 'pgoutput')" \
  -c "SELECT pg_create_logical_replication_slot('decode_probe2', 'pgoutput')" \
  -c "SELECT pg_create_logical_replication_slot('peek_probe', 'pgoutput')" \
  -c "SELECT pg_create_logical_replication_slot('peek_probe_binary', 'pgoutput')" >/dev/null
echo "catchup-bench: writing a backlog of $BACKLOG_TXNS transactions"
txn_script "$RESULTS/catchup-txn.sql" "$ROWS" "$CLIENTS" 100 10 5
wal_start=$(val_src catchup "SELECT pg_current_wal_lsn()")
"$bindir/pgbench" -n -h 127.0.0.1 -p "$SRC_PORT" -U postgres -c "$CLIENTS" -t $((BACKLOG_TXNS / CLIENTS)) \
  -f "$RESULTS/catchup-txn.sql" catchup >"$RESULTS/catchup-pgbench.log" 2>&1
wal_end=$(val_src catchup "SELECT pg_current_wal_lsn()")
wal_bytes=$(val_src catchup "SELECT '$wal_end'::pg_lsn - '$wal_start'::pg_lsn")
committed=$(awk '/number of transactions actually processed/ {split($6, a, "/"); print a[1]}' "$RESULTS/catchup-pgbench.log")
echo "catchup-bench: $committed transactions, $wal_bytes bytes of WAL"

# floor SLOT N: streams the backlog from SLOT through scripts/discard and
# sets floor_secs_N, floor_walsender_cpu_N and floor_self_cpu_N.
floor() {
  local c0 t0 t1
  settle catchup
  echo "catchup-bench: the floor ($2): read and discard the same backlog"
  c0=$(children_cpu "$SRC_PORT")
  t0=$(now)
  timeout 1800 "$root/bin/discard" -url "postgres://postgres@127.0.0.1:$SRC_VIA_PORT/catchup?replication=database" \
    -slot "$1" -publication pgsync_catchup -until "$wal_end" >"$RESULTS/catchup-floor-$2.json"
  t1=$(now)
  sleep 0.5
  printf -v "floor_secs_$2" %s "$(elapsed "$t0" "$t1")"
  printf -v "floor_walsender_cpu_$2" %s "$(cpu_delta "$SRC_PORT" "$c0")"
  printf -v "floor_self_cpu_$2" %s "$(sed -n 's/.*"cpu_seconds": \([0-9.]*\).*/\1/p' "$RESULTS/catchup-floor-$2.json")"
  psql_src catchup -c "SELECT pg_drop_replication_slot('$1')" >/dev/null
}
# Twice: the reader's pacing makes single runs vary; the floor is the faster.
floor decode_probe 1
floor decode_probe2 2
floor_secs=$(awk -v a="$floor_secs_1" -v b="$floor_secs_2" 'BEGIN { print (a < b ? a : b) }')

settle catchup
echo "catchup-bench: decoding inside the server (peek)"
t0=$(now)
val_src catchup "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('peek_probe', '$wal_end', NULL,
  'proto_version', '1', 'publication_names', 'pgsync_catchup')" >/dev/null
t1=$(now)
peek_secs=$(elapsed "$t0" "$t1")
psql_src catchup -c "SELECT pg_drop_replication_slot('peek_probe')" >/dev/null
# The same with pgoutput's binary option (PostgreSQL 14+): what binary
# values would save the walsender.
settle catchup
t0=$(now)
val_src catchup "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('peek_probe_binary', '$wal_end', NULL,
  'proto_version', '1', 'publication_names', 'pgsync_catchup', 'binary', 'true')" >/dev/null
t1=$(now)
peek_binary_secs=$(elapsed "$t0" "$t1")
psql_src catchup -c "SELECT pg_drop_replication_slot('peek_probe_binary')" >/dev/null

settle catchup
echo "catchup-bench: pgsync run --until-caught-up"
src_c0=$(children_cpu "$SRC_PORT") tgt_c0=$(children_cpu "$TGT_PORT")
commits0=$(val_tgt catchup "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
# shellcheck disable=SC2086 # PGSYNC_RUN_FLAGS holds several flags
sampled_run catchup-pgsync "$PGSYNC" -c "$cfg" run --until-caught-up --log-every 1s ${PGSYNC_RUN_FLAGS:-}
sleep 1
pg_walsender_cpu=$(cpu_delta "$SRC_PORT" "$src_c0")
pg_backend_cpu=$(cpu_delta "$TGT_PORT" "$tgt_c0")
# Target transactions committed during the run (pgsync's groups, plus the
# handful of psql sessions around it): what synchronous_commit costs.
target_commits=$(( $(val_tgt catchup "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()") - commits0 ))
pg_secs=$run_secs rss_avg=$run_rss_avg rss_peak=$run_rss_peak cpu_avg=$run_cpu
rows_applied=$(sed -n 's/.*msg=stopped.* rows=\([0-9]*\).*/\1/p' "$RESULTS/catchup-pgsync.log" | tail -1)
txns_applied=$(sed -n 's/.*msg=stopped.* txns=\([0-9]*\).*/\1/p' "$RESULTS/catchup-pgsync.log" | tail -1)
pg_self_cpu=$(sed -n 's/.*msg=stopped.* cpu_s=\([0-9.]*\).*/\1/p' "$RESULTS/catchup-pgsync.log" | tail -1)
if "$PGSYNC" -c "$cfg" verify >"$RESULTS/catchup-verify.txt"; then pg_match=true; else pg_match=false; fi

psql_tgt catchup -c "VACUUM ANALYZE bench_a, bench_b"
settle catchup
echo "catchup-bench: native subscription, enabled on the same backlog"
t0=$(now)
psql_tgt catchup_native -c "ALTER SUBSCRIPTION native_catchup ENABLE"
wait_for 1800 "native catch-up" lsn_ge_slot native_catchup "$wal_end"
t1=$(now)
native_secs=$(elapsed "$t0" "$t1")
# Both processes started at ENABLE: their whole CPU is the catch-up's.
native_walsender_cpu=$(proc_cpu "$(val_src postgres "SELECT active_pid FROM pg_replication_slots WHERE slot_name = 'native_catchup'")")
native_worker_cpu=$(proc_cpu "$(val_tgt catchup_native "SELECT pid FROM pg_stat_subscription WHERE subname = 'native_catchup' AND relid IS NULL")")
write_config "$RESULTS/catchup-native.toml" catchup catchup catchup_native
if "$PGSYNC" -c "$RESULTS/catchup-native.toml" verify >"$RESULTS/catchup-native-verify.txt"; then native_match=true; else native_match=false; fi
drop_subscription catchup_native native_catchup
psql_src catchup -c "SELECT pg_drop_replication_slot('native_catchup')" >/dev/null


need txns_applied rows_applied
cat >"$RESULTS/catchup.json" <<JSON
{
  "benchmark": "catchup",
  "command": "scripts/catchup-bench.sh (BACKLOG_TXNS=$BACKLOG_TXNS ROWS=$ROWS)",$(rtt_json)
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "backlog_transactions": $committed,
  "wal_bytes": $wal_bytes,
  "pgsync": {
    "seconds": $pg_secs,
    "transactions_applied": ${txns_applied},
    "row_ops_applied": ${rows_applied},
    "txn_per_s": $(ratio "${txns_applied}" "$pg_secs"),
    "row_ops_per_s": $(ratio "${rows_applied}" "$pg_secs"),
    "wal_mb_per_s": $(ratio "$(awk -v b="$wal_bytes" 'BEGIN {print b / 1e6}')" "$pg_secs"),
    "rss_avg_mb": $rss_avg,
    "rss_peak_mb": $rss_peak,
    "cpu_avg_pct": $cpu_avg,
    "cpu_seconds": {"pgsync": ${pg_self_cpu:-null}, "walsender": $pg_walsender_cpu, "target_backend": $pg_backend_cpu},
    "target_commits": $target_commits,
    "hashes_match": $pg_match
  },
  "native": {
    "seconds": $native_secs,
    "txn_per_s": $(ratio "$committed" "$native_secs"),
    "cpu_seconds": {"walsender": $native_walsender_cpu, "apply_worker": $native_worker_cpu},
    "hashes_match": $native_match
  },
  "floor": {
    "what": "scripts/discard: stream the same backlog from a slot at the same point, read and discard, acknowledge the end; the faster of two runs",
    "seconds": $floor_secs,
    "runs": [
      {"seconds": $floor_secs_1, "cpu_seconds": {"discard": ${floor_self_cpu_1:-null}, "walsender": $floor_walsender_cpu_1}},
      {"seconds": $floor_secs_2, "cpu_seconds": {"discard": ${floor_self_cpu_2:-null}, "walsender": $floor_walsender_cpu_2}}
    ]
  },
  "peek_seconds": $peek_secs,
  "peek_binary_seconds": $peek_binary_secs,
  "pgsync_vs_floor": $(ratio "$pg_secs" "$floor_secs"),
  "pgsync_vs_native": $(ratio "$pg_secs" "$native_secs"),
  "pgsync_speedup_vs_native": $(ratio "$native_secs" "$pg_secs")
}
JSON
cat "$RESULTS/catchup.json"
