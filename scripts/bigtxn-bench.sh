#!/usr/bin/env bash
# Memory under one large transaction: a single source transaction of
# BIG_ROWS (default 1,000,000) inserted rows is applied by
# `pgsync run --until-caught-up`; RSS is sampled throughout. pgsync applies
# the transaction as it arrives, so its memory stays at the configured
# bounds (max_inflight_bytes) whatever the transaction's size.
# Writes bench-results/bigtxn-*.{csv,log,svg} and bigtxn.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
BIG_ROWS=${BIG_ROWS:-1000000}
bench_setup

fresh_job bigtxn "$TABLES_DDL"
echo "bigtxn-bench: one transaction of $BIG_ROWS rows"
psql_src bigtxn -c "INSERT INTO bench_a SELECT g, 'customer-' || g, g % 1000, g / 7.0, now(), repeat(md5(g::text), 2) FROM generate_series(1, $BIG_ROWS) g"
settle bigtxn
src_c0=$(children_cpu "$SRC_PORT") tgt_c0=$(children_cpu "$TGT_PORT")
sampled_run bigtxn-pgsync "$PGSYNC" -c "$cfg" run --until-caught-up --log-every 1s
sleep 1
walsender_cpu=$(cpu_delta "$SRC_PORT" "$src_c0")
backend_cpu=$(cpu_delta "$TGT_PORT" "$tgt_c0")
self_cpu=$(sed -n 's/.*msg=stopped.* cpu_s=\([0-9.]*\).*/\1/p' "$RESULTS/bigtxn-pgsync.log" | tail -1)
secs=$run_secs rss_avg=$run_rss_avg rss_peak=$run_rss_peak cpu_avg=$run_cpu
if "$PGSYNC" -c "$cfg" verify >"$RESULTS/bigtxn-verify.txt"; then match=true; else match=false; fi
cat >"$RESULTS/bigtxn.json" <<JSON
{
  "benchmark": "bigtxn",
  "command": "BIG_ROWS=$BIG_ROWS scripts/bigtxn-bench.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "rows_in_transaction": $BIG_ROWS,
  "seconds": $secs,
  "rows_per_s": $(ratio "$BIG_ROWS" "$secs"),
  "rss_avg_mb": $rss_avg,
  "rss_peak_mb": $rss_peak,
  "cpu_seconds": {"pgsync": ${self_cpu:-null}, "walsender": $walsender_cpu, "target_backend": $backend_cpu},
  "cpu_avg_pct": $cpu_avg,
  "hashes_match": $match
}
JSON
cat "$RESULTS/bigtxn.json"
