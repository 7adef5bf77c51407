#!/usr/bin/env bash
# Many jobs side by side: for each N in WORKERS, N jobs (one pgsync process
# each, each with its own schema, publication, slot and target tables) while
# pgbench writes to all of them for SCALE_SECONDS; then every job is drained
# and verified. Writes bench-results/scale-<N>-*.csv and scale.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
WORKERS=${WORKERS:-5 10 20}
SCALE_SECONDS=${SCALE_SECONDS:-60}
ROWS=${ROWS:-20000}
bench_setup

results=()
for n in $WORKERS; do
  echo "scale: $n jobs"
  fresh_db scale
  scripts=()
  for i in $(seq 1 "$n"); do
    psql_src scale <<SQL
CREATE SCHEMA s$i;
CREATE TABLE s$i.items (id bigint PRIMARY KEY, qty int NOT NULL, note text, at timestamptz NOT NULL DEFAULT now());
INSERT INTO s$i.items SELECT g, g % 100, md5(g::text), now() FROM generate_series(1, $ROWS) g;
CREATE SEQUENCE s$i.ids START $((ROWS + 1));
SQL
    cat >"$RESULTS/scale-job$i.sql" <<SQL
\\set id random(1, $ROWS)
BEGIN;
UPDATE s$i.items SET qty = qty + 1, at = now() WHERE id = :id;
INSERT INTO s$i.items (id, qty, note) VALUES (nextval('s$i.ids'), 1, 'new');
DELETE FROM s$i.items WHERE id = (SELECT min(id) FROM s$i.items WHERE id > :id);
END;
SQL
    scripts+=(-f "$RESULTS/scale-job$i.sql")
    write_config "$RESULTS/scale-job$i.toml" "scale$i" scale scale "\"s$i.*\""
    "$PGSYNC" -c "$RESULTS/scale-job$i.toml" bootstrap >/dev/null 2>>"$RESULTS/scale-$n-bootstrap.log"
  done
  pids=()
  for i in $(seq 1 "$n"); do
    "$PGSYNC" -c "$RESULTS/scale-job$i.toml" run 2>"$RESULTS/scale-$n-job$i.log" &
    pids+=($!)
    sample_proc "$!" "$RESULTS/scale-$n-job$i-rss.csv" &
  done
  "$bindir/pgbench" -n -h 127.0.0.1 -p "$SRC_PORT" -U postgres -c 4 -T "$SCALE_SECONDS" "${scripts[@]}" scale \
    >"$RESULTS/scale-$n-pgbench.log" 2>&1
  head=$(val_src scale "SELECT pg_current_wal_lsn()")
  for i in $(seq 1 "$n"); do
    wait_for 300 "job $i to drain" lsn_ge_slot "pgsync_scale$i" "$head"
  done
  kill -TERM "${pids[@]}"
  for p in "${pids[@]}"; do wait_exit "$p" 60 || true; done
  sleep 1
  consistent=0
  for i in $(seq 1 "$n"); do
    if "$PGSYNC" -c "$RESULTS/scale-job$i.toml" verify >"$RESULTS/scale-$n-job$i-verify.txt"; then consistent=$((consistent + 1)); fi
  done
  # Per process: average of the per-process averages and the largest peak.
  # Aggregate: RSS of all processes summed per quarter-second tick.
  per=$(for i in $(seq 1 "$n"); do rss_stats "$RESULTS/scale-$n-job$i-rss.csv"; done |
    awk '{ a += $1; if ($2 > p) p = $2 } END { printf "%.1f %.1f", a / NR, p }')
  agg=$(for i in $(seq 1 "$n"); do tail -n +2 "$RESULTS/scale-$n-job$i-rss.csv"; done |
    awk -F, '{ t = int(($1 - 1700000000) * 4); s[t] += $2 } END { for (t in s) { n++; a += s[t]; if (s[t] > p) p = s[t] } printf "%.1f %.1f", a / n / 1024, p / 1024 }')
  committed=$(awk '/number of transactions actually processed/ {split($6, a, "/"); print a[1]}' "$RESULTS/scale-$n-pgbench.log")
  read -r per_avg per_peak <<<"$per"
  read -r agg_avg agg_peak <<<"$agg"
  echo "scale: $n jobs, $consistent consistent, per-process RSS avg $per_avg MB peak $per_peak MB, aggregate avg $agg_avg MB peak $agg_peak MB"
  need committed
  results+=("{\"workers\": $n, \"jobs_consistent\": $consistent, \"transactions_committed\": ${committed}, \"per_process_rss_avg_mb\": $per_avg, \"per_process_rss_peak_mb\": $per_peak, \"aggregate_rss_avg_mb\": $agg_avg, \"aggregate_rss_peak_mb\": $agg_peak}")
  for i in $(seq 1 "$n"); do "$PGSYNC" -c "$RESULTS/scale-job$i.toml" teardown >/dev/null; done
done

{
  echo "{"
  echo "  \"benchmark\": \"scale\","
  echo "  \"command\": \"WORKERS='$WORKERS' SCALE_SECONDS=$SCALE_SECONDS scripts/scale.sh\","
  echo "  \"date\": \"$(date -u +%FT%TZ)\","
  env_json
  echo "  ,\"runs\": ["
  sep=""
  for r in "${results[@]}"; do echo "    $sep$r"; sep=","; done
  echo "  ]"
  echo "}"
} >"$RESULTS/scale.json"
cat "$RESULTS/scale.json"
