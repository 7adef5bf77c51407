#!/usr/bin/env bash
# Resume, not restart: ten tables; a full bootstrap is timed; then, from
# scratch again, a bootstrap is killed (SIGKILL) once about 80 % of the
# tables are recorded copied, and the rerun is timed: it must copy only
# what was missing (the tables copied are kept) and take at most 0.3x the
# full copy's time. Writes made during and after the killed copy are then
# applied by run --until-caught-up, and verify must say identical.
# ROWS (default 400000 a table, about 55 MB of COPY text each) sizes it.
# Writes bench-results/resume.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
ROWS=${ROWS:-400000}
TABLES=10
KILL_AT=${KILL_AT:-8} # tables recorded ready when the kill comes
bench_setup
work=$(mktemp -d)
cleanup() { pkill -9 -f "$work/" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

load() {
  fresh_db resume
  for i in $(seq 1 $TABLES); do
    psql_src resume -c "CREATE TABLE t$i (id bigint PRIMARY KEY, v int NOT NULL, note text);
      INSERT INTO t$i SELECT g, 0, md5(g::text) || md5((g + $i)::text) FROM generate_series(1, $ROWS) g;" >/dev/null
  done
  psql_src resume -c "VACUUM ANALYZE" >/dev/null
}

write_config "$work/resume.toml" resume resume resume
load
began=$(now)
"$PGSYNC" -c "$work/resume.toml" bootstrap >"$work/full.out" 2>"$RESULTS/resume-full-bootstrap.log"
full_s=$(elapsed "$began" "$(now)")
echo "full bootstrap: ${full_s}s"

load
"$PGSYNC" -c "$work/resume.toml" bootstrap >/dev/null 2>"$RESULTS/resume-killed-bootstrap.log" &
pid=$!
ready() { [ "$(val_tgt resume "SELECT count(*) FROM pgsync.tables WHERE job = 'resume' AND state = 'ready'" 2>/dev/null || echo 0)" -ge "$KILL_AT" ]; }
wait_for 600 "$KILL_AT tables copied" ready
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
copied_at_kill=$(val_tgt resume "SELECT count(*) FROM pgsync.tables WHERE job = 'resume' AND state = 'ready'")
rows_at_kill=$(val_tgt resume "SELECT sum(n_live_tup) FROM pg_stat_user_tables WHERE schemaname = 'public'")
echo "killed with $copied_at_kill of $TABLES tables recorded copied"
psql_src resume -c "UPDATE t1 SET v = 1 WHERE id <= 1000; UPDATE t$TABLES SET v = 1 WHERE id <= 1000; DELETE FROM t2 WHERE id <= 10" >/dev/null

began=$(now)
"$PGSYNC" -c "$work/resume.toml" bootstrap >"$work/rerun.out" 2>"$RESULTS/resume-rerun-bootstrap.log"
rerun_s=$(elapsed "$began" "$(now)")
cat "$work/rerun.out"
recopied=$(grep -c 'msg="table copied"' "$RESULTS/resume-rerun-bootstrap.log" || true)
echo "rerun: ${rerun_s}s, $recopied tables copied again"
psql_src resume -c "UPDATE t3 SET v = 2 WHERE id <= 1000; INSERT INTO t4 VALUES ($ROWS + 1, 2, 'after')" >/dev/null
"$PGSYNC" -c "$work/resume.toml" run --until-caught-up 2>"$RESULTS/resume-run.log"
verify=fail
if "$PGSYNC" -c "$work/resume.toml" verify >"$RESULTS/resume-verify.txt" 2>&1; then verify=identical; fi
echo "verify: $verify"
need rows_at_kill
cat >"$RESULTS/resume.json" <<JSON
{
  "command": "bash scripts/resume-bench.sh (ROWS=$ROWS)",
  "tables": $TABLES,
  "rows_per_table": $ROWS,
  "full_bootstrap_s": $full_s,
  "tables_copied_at_kill": $copied_at_kill,
  "target_rows_at_kill": ${rows_at_kill},
  "rerun_s": $rerun_s,
  "tables_copied_by_rerun": $recopied,
  "rerun_over_full": $(ratio "$rerun_s" "$full_s"),
  "verify": "$verify",
$(env_json)
}
JSON
cat "$RESULTS/resume.json"
[ "$verify" = identical ]
