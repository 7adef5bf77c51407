#!/usr/bin/env bash
# Memory under large values: one row with a BIG_MB (default 40) MB bytea and
# one with a BIG_MB MB text are inserted, then both values are replaced by
# UPDATEs, each in its own source transaction; `pgsync run --until-caught-up`
# applies the four transactions. The peak RSS is the kernel's
# (/usr/bin/time -v, "Maximum resident set size"), so no short spike is
# missed. Writes bench-results/bigvalue.json (and .log).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
BIG_MB=${BIG_MB:-40}
bench_setup

fresh_job bigvalue "CREATE TABLE big (id int PRIMARY KEY, b bytea, t text)"
# Random values, so that TOAST compression does not shrink them.
md5s=$((BIG_MB * 1024 * 1024 / 16))
echo "bigvalue-bench: ${BIG_MB} MB bytea and ${BIG_MB} MB text, inserted then updated"
psql_src bigvalue -c "INSERT INTO big SELECT 1, decode(string_agg(md5(random()::text), ''), 'hex'), NULL FROM generate_series(1, $md5s)"
psql_src bigvalue -c "INSERT INTO big SELECT 2, NULL, left(string_agg(md5(random()::text), ''), $BIG_MB * 1024 * 1024) FROM generate_series(1, $((md5s / 2 + 1)))"
psql_src bigvalue -c "UPDATE big SET b = (SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, $md5s)) WHERE id = 1"
psql_src bigvalue -c "UPDATE big SET t = (SELECT left(string_agg(md5(random()::text), ''), $BIG_MB * 1024 * 1024) FROM generate_series(1, $((md5s / 2 + 1)))) WHERE id = 2"
max_inflight=$(grep -o 'max_inflight_bytes *= *"[^"]*"' "$cfg" | cut -d'"' -f2 || true)
t0=$(now)
/usr/bin/time -v -o "$RESULTS/bigvalue-time.txt" env ${BENCH_ENV:-} "$PGSYNC" -c "$cfg" run --until-caught-up --log-every 1s 2>"$RESULTS/bigvalue.log" &
wait_exit $! 600
t1=$(now)
peak_kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$RESULTS/bigvalue-time.txt")
if "$PGSYNC" -c "$cfg" verify >"$RESULTS/bigvalue-verify.txt"; then match=true; else match=false; fi
cat >"$RESULTS/bigvalue.json" <<JSON
{
  "benchmark": "bigvalue",
  "command": "BIG_MB=$BIG_MB scripts/bigvalue-bench.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "value_mb": $BIG_MB,
  "max_inflight_bytes": "${max_inflight:-16MiB (default)}",
  "seconds": $(elapsed "$t0" "$t1"),
  "rss_peak_mb": $(awk -v k="$peak_kb" 'BEGIN { printf "%.1f", k / 1024 }'),
  "hashes_match": $match
}
JSON
cat "$RESULTS/bigvalue.json"
