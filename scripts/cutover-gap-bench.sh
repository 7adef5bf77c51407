#!/usr/bin/env bash
# The application's write gap at cutover (issue 24), at two database
# sizes under the same pgbench load: for each SCALES entry (default "6 60":
# about 100 MB and 1 GB, pgbench_accounts plus a table of TOASTed
# documents: 165 MB at scale 60, as in issue 24), the source is initialised, bootstrapped
# and streamed by pgsync run while pgbench writes RATE (300) transactions a
# second as role bench_app; after LOAD_S (20) seconds, `cutover
# --lock-source bench_app --json` locks the role, waits, reports the target
# ready and only then compares the tables. The gap is measured from the
# application's side: from the end of its last transaction committed on the
# source (pgbench's per-transaction log) to the moment cutover reported the
# target ready for writes (ready_at). Writes
# bench-results/cutover-gap.json (and the logs beside it).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
SCALES=${SCALES:-"6 60"}
RATE=${RATE:-300}
LOAD_S=${LOAD_S:-20}
bench_setup
BENCH_ON_EXIT='psql_src postgres -c "DROP ROLE IF EXISTS bench_app" >/dev/null 2>&1'

results=()
for scale in $SCALES; do
  db=gap$scale
  fresh_db "$db"
  psql_tgt postgres -c "CREATE ROLE bench_app LOGIN" >/dev/null 2>&1 || true
  psql_src postgres -c "DROP ROLE IF EXISTS bench_app" -c "CREATE ROLE bench_app LOGIN" >/dev/null 2>&1 ||
    psql_src postgres -c "ALTER ROLE bench_app RESET ALL" >/dev/null
  echo "cutover-gap-bench: scale $scale: pgbench -i"
  "$bindir/pgbench" -i -q -s "$scale" --foreign-keys -h 127.0.0.1 -p "$SRC_PORT" -U postgres "$db" >"$RESULTS/cutover-gap-$scale-init.log" 2>&1
  docs=$((scale * 1000))
  psql_src "$db" <<SQL
ALTER TABLE pgbench_history REPLICA IDENTITY FULL;
CREATE TABLE documents (id bigint PRIMARY KEY, body text NOT NULL);
INSERT INTO documents SELECT g, string_agg(md5(g::text || i::text), '') FROM generate_series(1, $docs) g, generate_series(1, 85) i GROUP BY g;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO bench_app;
VACUUM ANALYZE;
SQL
  size_mb=$(val_src "$db" "SELECT round(pg_database_size(current_database()) / 1048576.0)")
  cfg=$RESULTS/cutover-gap-$scale.toml
  write_config "$cfg" "gap$scale" "$db" "$db"
  t0=$(now)
  "$PGSYNC" -c "$cfg" bootstrap >/dev/null 2>"$RESULTS/cutover-gap-$scale-bootstrap.log"
  bootstrap_s=$(elapsed "$t0" "$(now)")
  "$PGSYNC" -c "$cfg" run >"$RESULTS/cutover-gap-$scale-run.log" 2>&1 &
  run_pid=$!
  rm -f "$RESULTS"/cutover-gap-$scale-pgbench.[0-9]*
  # The application: pgbench as bench_app at a fixed rate, one log line a
  # transaction (its end: epoch seconds and microseconds, fields 5 and 6).
  (cd "$RESULTS" && "$bindir/pgbench" -n -c 4 -j 2 -R "$RATE" -T $((LOAD_S + 120)) -l --log-prefix="cutover-gap-$scale-pgbench" \
    -h 127.0.0.1 -p "$SRC_PORT" -U bench_app "$db" >"$RESULTS/cutover-gap-$scale-pgbench.out" 2>&1) &
  bench_pid=$!
  sleep "$LOAD_S"
  "$PGSYNC" -c "$cfg" cutover --lock-source bench_app --timeout 120s --json >"$RESULTS/cutover-gap-$scale.json" 2>"$RESULTS/cutover-gap-$scale-cutover.log" || {
    echo "cutover failed at scale $scale (see $RESULTS/cutover-gap-$scale-cutover.log)" >&2; exit 1; }
  wait_exit "$bench_pid" 60 || true # its clients end when their sessions are ended
  kill "$run_pid" 2>/dev/null || true
  wait "$run_pid" 2>/dev/null || true
  last_commit=$(cat "$RESULTS"/cutover-gap-$scale-pgbench.[0-9]* | awk '{ t = $5 + $6 / 1e6; if (t > m) m = t } END { printf "%.6f", m }')
  commits=$(cat "$RESULTS"/cutover-gap-$scale-pgbench.[0-9]* | wc -l)
  ready=$(grep -o '"ready_at": "[^"]*"' "$RESULTS/cutover-gap-$scale.json" | cut -d'"' -f4)
  ready_epoch=$(date -d "$ready" +%s.%N)
  gap=$(elapsed "$last_commit" "$ready_epoch")
  lock_gap=$(grep -o '"write_gap_seconds": [0-9.e-]*' "$RESULTS/cutover-gap-$scale.json" | awk '{print $2}')
  verify_s=$(grep -o '"verify_seconds": [0-9.e-]*' "$RESULTS/cutover-gap-$scale.json" | awk '{print $2}')
  identical=$(grep -o '"identical": [a-z]*' "$RESULTS/cutover-gap-$scale.json" | awk '{print $2}')
  psql_src postgres -c "ALTER ROLE bench_app RESET ALL" >/dev/null
  echo "cutover-gap-bench: scale $scale ($size_mb MB): application's write gap ${gap} s (lock to ready ${lock_gap} s), verify after ready ${verify_s} s, identical=$identical"
  results+=("{\"scale\": $scale, \"database_mb\": $size_mb, \"bootstrap_seconds\": $bootstrap_s, \"source_commits\": $commits, \"app_write_gap_seconds\": $gap, \"lock_to_ready_seconds\": $lock_gap, \"verify_after_ready_seconds\": $verify_s, \"identical\": $identical}")
done
{
  echo "{"
  echo "  \"benchmark\": \"cutover-gap\","
  echo "  \"command\": \"SCALES='$SCALES' RATE=$RATE LOAD_S=$LOAD_S scripts/cutover-gap-bench.sh\","
  echo "  \"date\": \"$(date -u +%FT%TZ)\","
  env_json
  echo "  ,\"runs\": ["
  (IFS=,; echo "    ${results[*]}")
  echo "  ]"
  echo "}"
} >"$RESULTS/cutover-gap.json"
cat "$RESULTS/cutover-gap.json"
