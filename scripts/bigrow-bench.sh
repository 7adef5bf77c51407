#!/usr/bin/env bash
# Memory with one row as large as a test can make it (issue 22, point 7):
# a row of two VALUE_MB (default 40) MB values, one bytea and one text, of
# random bytes (TOAST does not shrink them), carried on every path, each
# measured by the kernel's peak resident set size (/usr/bin/time -v,
# "Maximum resident set size", so no short spike is missed):
#   copy       bootstrap copying a table that holds the row;
#   caught-up  run --until-caught-up applying the row's INSERT;
#   run        run applying the row's UPDATE (both values replaced) while
#              streaming, stopped by SIGTERM once caught up;
#   streamed   run --until-caught-up applying a transaction larger than
#              logical_decoding_work_mem (64 kB here), streamed as it runs,
#              whose last change is the row.
# Goal: at most twice the row plus 30 MB on each. Writes
# bench-results/bigrow.json (and the logs beside it).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
VALUE_MB=${VALUE_MB:-40}
bench_setup
md5s=$((VALUE_MB * 1024 * 1024 / 16))
bytea_sql="(SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, $md5s))"
text_sql="(SELECT left(string_agg(md5(random()::text), ''), $VALUE_MB * 1024 * 1024) FROM generate_series(1, $((md5s / 2 + 1))))"
peak_mb() { awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); printf "%.1f", $2 / 1024}' "$1"; }
measure() { # measure NAME CMD...: runs CMD under /usr/bin/time -v, bounded
  local name=$1; shift
  /usr/bin/time -v -o "$RESULTS/bigrow-$name-time.txt" "$@" >"$RESULTS/bigrow-$name.out" 2>"$RESULTS/bigrow-$name.log" &
  wait_exit $! 600
}

fresh_db bigrow
psql_src bigrow -c "CREATE TABLE big (id int PRIMARY KEY, b bytea, t text); ALTER TABLE big ALTER b SET STORAGE EXTERNAL, ALTER t SET STORAGE EXTERNAL"
psql_src bigrow -c "INSERT INTO big VALUES (1, $bytea_sql, $text_sql)"
cfg=$RESULTS/bigrow.toml
write_config "$cfg" bigrow bigrow bigrow
row_mb=$(val_src bigrow "SELECT round((octet_length(b) + octet_length(t)) / 1048576.0, 1) FROM big WHERE id = 1")
echo "bigrow-bench: a row of $row_mb MB"

measure copy env ${BENCH_ENV:-} "$PGSYNC" -c "$cfg" bootstrap
copy_mb=$(peak_mb "$RESULTS/bigrow-copy-time.txt")

psql_src bigrow -c "INSERT INTO big VALUES (2, $bytea_sql, $text_sql)"
measure caughtup env ${BENCH_ENV:-} "$PGSYNC" -c "$cfg" run --until-caught-up
caughtup_mb=$(peak_mb "$RESULTS/bigrow-caughtup-time.txt")

/usr/bin/time -v -o "$RESULTS/bigrow-run-time.txt" env ${BENCH_ENV:-} "$PGSYNC" -c "$cfg" run >"$RESULTS/bigrow-run.out" 2>"$RESULTS/bigrow-run.log" &
timed=$!
sleep 1
psql_src bigrow -c "UPDATE big SET b = $bytea_sql, t = $text_sql WHERE id = 2"
goal=$(val_src bigrow "SELECT pg_current_wal_lsn()")
wait_for 300 "run to apply the update" lsn_ge_slot pgsync_bigrow "$goal"
pkill -TERM -P "$timed" pgsync 2>/dev/null || pkill -TERM -f "pgsync -c $cfg run" || true
wait_exit "$timed" 60 || true
run_mb=$(peak_mb "$RESULTS/bigrow-run-time.txt")

psql_src bigrow -c "ALTER SYSTEM SET logical_decoding_work_mem = '64kB'" -c "SELECT pg_reload_conf()" >/dev/null
psql_src bigrow -c "BEGIN; INSERT INTO big SELECT g, NULL, repeat('s', 200) FROM generate_series(100, 3100) g; INSERT INTO big VALUES (3, $bytea_sql, $text_sql); COMMIT;"
measure streamed env ${BENCH_ENV:-} "$PGSYNC" -c "$cfg" run --until-caught-up
streamed_mb=$(peak_mb "$RESULTS/bigrow-streamed-time.txt")
psql_src bigrow -c "ALTER SYSTEM RESET logical_decoding_work_mem" -c "SELECT pg_reload_conf()" >/dev/null
streamed_seen=$(grep -c "stream" "$RESULTS/bigrow-streamed.log" || true)
if "$PGSYNC" -c "$cfg" verify >"$RESULTS/bigrow-verify.txt"; then match=true; else match=false; fi
goal_mb=$(awk -v r="$row_mb" 'BEGIN { printf "%.1f", 2 * r + 30 }')
cat >"$RESULTS/bigrow.json" <<JSON
{
  "benchmark": "bigrow",
  "command": "VALUE_MB=$VALUE_MB scripts/bigrow-bench.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "row_mb": $row_mb,
  "goal_mb": $goal_mb,
  "peak_rss_mb": {"copy": $copy_mb, "run_until_caught_up": $caughtup_mb, "run": $run_mb, "streamed": $streamed_mb},
  "streamed_log_lines": $streamed_seen,
  "verify_identical": $match
}
JSON
cat "$RESULTS/bigrow.json"
