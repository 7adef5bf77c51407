#!/usr/bin/env bash
# verify --rows beside verify and beside the copy of the same table (issue
# 24): one table of ROWS (default 10,000,000) rows of about 70 bytes,
# bootstrapped (the copy's time from bootstrap's log), then DIFFS (10) rows
# changed on the target behind pgsync's back (a row removed, a row added,
# values changed); `pgsync verify` and `pgsync verify --rows` are timed
# with their peak RSS (/usr/bin/time -v). Goal: verify --rows no longer
# than the copy, in at most 50 MB. Writes bench-results/verify-rows.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
ROWS=${ROWS:-10000000}
bench_setup
fresh_db vrows
echo "verify-rows-bench: loading $ROWS rows"
psql_src vrows <<SQL
CREATE TABLE items (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2), created timestamptz NOT NULL, note text);
INSERT INTO items SELECT g, 'customer ' || (g % 100000), (g % 97)::int, (g % 10000) / 100.0, '2026-01-01'::timestamptz + g * interval '1 second', md5(g::text)
FROM generate_series(1, $ROWS) g;
VACUUM ANALYZE items;
SQL
size_mb=$(val_src vrows "SELECT round(pg_table_size('items') / 1048576.0)")
cfg=$RESULTS/verify-rows.toml
write_config "$cfg" vrows vrows vrows
t0=$(now)
"$PGSYNC" -c "$cfg" bootstrap >/dev/null 2>"$RESULTS/verify-rows-bootstrap.log"
bootstrap_s=$(elapsed "$t0" "$(now)")
copy_s=$(grep -o 'msg="table copied" table=public.items .* seconds=[0-9.]*' "$RESULTS/verify-rows-bootstrap.log" | grep -o 'seconds=[0-9.]*' | cut -d= -f2)
psql_tgt vrows <<SQL
DELETE FROM items WHERE id IN (17, 1000003);
INSERT INTO items VALUES ($ROWS + 1, 'extra', 1, 1, now(), 'x'), ($ROWS + 2, 'extra', 2, 2, now(), 'y');
UPDATE items SET qty = qty + 1 WHERE id IN (42, 4242, 424242);
UPDATE items SET note = 'changed' WHERE id IN (7, 77, 777);
SQL
psql_tgt vrows -c "VACUUM ANALYZE items" -c "CHECKPOINT"; psql_src vrows -c "CHECKPOINT"
peak_mb() { awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); printf "%.1f", $2 / 1024}' "$1"; }
t0=$(now)
/usr/bin/time -v -o "$RESULTS/verify-rows-verify-time.txt" "$PGSYNC" -c "$cfg" verify >"$RESULTS/verify-rows-verify.out" 2>&1 || true
verify_s=$(elapsed "$t0" "$(now)")
t0=$(now)
/usr/bin/time -v -o "$RESULTS/verify-rows-rows-time.txt" "$PGSYNC" -c "$cfg" verify --rows >"$RESULTS/verify-rows-rows.out" 2>&1 || true
rows_s=$(elapsed "$t0" "$(now)")
found=$(grep -c ': only on the\|: values differ' "$RESULTS/verify-rows-rows.out" || true)
cat >"$RESULTS/verify-rows.json" <<JSON
{
  "benchmark": "verify-rows",
  "command": "ROWS=$ROWS scripts/verify-rows-bench.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "rows": $ROWS,
  "table_mb": $size_mb,
  "bootstrap_seconds": $bootstrap_s,
  "copy_seconds": ${copy_s:-null},
  "verify_seconds": $verify_s,
  "verify_rss_peak_mb": $(peak_mb "$RESULTS/verify-rows-verify-time.txt"),
  "verify_rows_seconds": $rows_s,
  "verify_rows_rss_peak_mb": $(peak_mb "$RESULTS/verify-rows-rows-time.txt"),
  "differences_planted": 10,
  "differences_named": $found
}
JSON
cat "$RESULTS/verify-rows.json"
