#!/usr/bin/env bash
# The fault matrix: one scripted run that injects every fault issue 7 lists
# while a steady write load goes to several tables (one without a key, so a
# duplicate would show), and checks after each group that the target equals
# the source (pgsync verify) and that every exit status is the documented
# one. Writes bench-results/faults.json and faults-*.log.
#
#   FAULT_SEED=n (default: the time) FAULT_KILLS=30 scripts/reliability/faults.sh
#
# Its own clusters (PGSYNC_PG_DIR, default /tmp/pgsync-faults-pg, ports
# 59432/59433) are destroyed at the end, pass or fail.
set -euo pipefail
export PGSYNC_PG_DIR=${PGSYNC_PG_DIR:-/tmp/pgsync-faults-pg}
export PGSYNC_SOURCE_PORT=${PGSYNC_SOURCE_PORT:-59432}
export PGSYNC_TARGET_PORT=${PGSYNC_TARGET_PORT:-59433}
source "$(dirname "$0")/lib.sh"
SEED=${FAULT_SEED:-$(date +%s)}
KILLS=${FAULT_KILLS:-30}
RANDOM=$SEED
echo "faults: seed $SEED (rerun with FAULT_SEED=$SEED)"
drill_setup
cleanup() {
  kill $(jobs -p) 2>/dev/null || true
  [ -n "${frozen:-}" ] && kill -CONT "$frozen" 2>/dev/null || true
  bash "$root/scripts/local-pg.sh" destroy >/dev/null 2>&1 || true
}
trap cleanup EXIT
LOG=$RESULTS/faults.log
: >"$LOG"
note() { echo "faults: $*" | tee -a "$LOG"; }
fail() { note "FAIL: $*"; exit 1; }

DB=faults
cfg=$RESULTS/faults.toml
fresh_db $DB
psql_src $DB <<'SQL'
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT g, 1000 FROM generate_series(1, 100000) g;
CREATE TABLE ledger (id bigserial PRIMARY KEY, acct int NOT NULL, delta bigint NOT NULL, at timestamptz DEFAULT now());
CREATE TABLE events (kind text, n int, note text);  -- no key: a duplicate would show
ALTER TABLE events REPLICA IDENTITY FULL;
CREATE TABLE filler (id bigint PRIMARY KEY, pad text);
INSERT INTO filler SELECT g, repeat(md5(g::text), 4) FROM generate_series(1, 1500000) g;
SQL
write_config "$cfg" faults $DB $DB
cat >"$RESULTS/faults-txn.sql" <<'SQL'
\set a random(1, 100000)
\set b random(1, 100000)
\set d random(1, 50)
BEGIN;
UPDATE accounts SET balance = balance - :d WHERE id = :a;
UPDATE accounts SET balance = balance + :d WHERE id = :b;
INSERT INTO ledger (acct, delta) VALUES (:a, -:d), (:b, :d);
INSERT INTO events VALUES ('transfer', :d, 'same'), ('transfer', :d, 'same');
END;
SQL

# The load: pgbench at a fixed rate, restarted when a source restart ends it.
load_pid=""
start_load() {
  ( while [ ! -f "$RESULTS/faults-stop-load" ]; do
      "$bindir/pgbench" -n -h 127.0.0.1 -p "$SRC_PORT" -U postgres -c 2 -R "${FAULT_RATE:-200}" -T 3600 \
        -f "$RESULTS/faults-txn.sql" $DB >>"$RESULTS/faults-pgbench.log" 2>&1 || sleep 0.5
    done ) &
  load_pid=$!
}
stop_load() {
  touch "$RESULTS/faults-stop-load"
  pkill -f "pgbench -n -h 127.0.0.1 -p $SRC_PORT" 2>/dev/null || true
  wait_exit "$load_pid" 30 || true
  load_pid=""
  rm -f "$RESULTS/faults-stop-load"
}

pgsync() { "$PGSYNC" -c "$cfg" "$@"; }
# verify_ok WHAT: the target equals the source after catching up.
verify_ok() {
  local rc=0 resume=""
  # The source must be quiet for the comparison: pause the load.
  if [ -n "$load_pid" ]; then stop_load; resume=yes; fi
  timeout 300 "$PGSYNC" -c "$cfg" run --until-caught-up >>"$LOG" 2>&1 || rc=$?
  [ $rc -eq 0 ] || fail "$1: run --until-caught-up exit $rc"
  pgsync verify >"$RESULTS/faults-verify.txt" 2>&1 || { cat "$RESULTS/faults-verify.txt" | tee -a "$LOG"; fail "$1: verify found a difference"; }
  local se te
  se=$(val_src $DB "SELECT count(*) || '/' || coalesce(sum(n), 0) FROM events")
  te=$(val_tgt $DB "SELECT count(*) || '/' || coalesce(sum(n), 0) FROM events")
  [ "$se" = "$te" ] || fail "$1: events (no key) source $se, target $te"
  note "$1: verify identical (events rows/sum $te)"
  if [ -n "$resume" ]; then start_load; fi
}
progress_lsn() { val_tgt $DB "SELECT lsn FROM pgsync.progress WHERE job = 'faults'"; }
slot_confirmed() { val_src $DB "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 'pgsync_faults'"; }
copying() { [ "$(val_tgt $DB "SELECT state FROM pgsync.progress WHERE job = 'faults'" 2>/dev/null)" = copying ]; }
bulk_applying() {
  [ "$(val_tgt $DB "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgsync' AND (query LIKE 'INSERT INTO %events%' OR query LIKE 'COPY %events%')")" != 0 ]
}
# spooling: run has a spool file open, so the source streams a transaction.
spooling() { compgen -G "${TMPDIR:-/tmp}/pgsync-faults-spool/*.spool" >/dev/null; }
rand_ms() { echo $(( $1 + RANDOM % ($2 - $1 + 1) )); }
sleep_ms() { sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"; }

start_load

# --- 5 SIGKILLs of bootstrap during the copy, each followed by a rerun.
bootstrap_kills=0
for i in 1 2 3 4 5; do
  force=""; [ $i -gt 1 ] && force=--force
  "$PGSYNC" -c "$cfg" bootstrap $force >>"$LOG" 2>&1 &
  pid=$!
  wait_for 60 "the copy to start" copying
  sleep_ms "$(rand_ms 100 900)"
  kill -9 "$pid" 2>/dev/null || fail "bootstrap $i finished before the kill"
  wait "$pid" 2>/dev/null || true
  bootstrap_kills=$((bootstrap_kills + 1))
  rc=0; timeout 600 "$PGSYNC" -c "$cfg" bootstrap >>"$LOG" 2>&1 || rc=$?
  [ $rc -eq 0 ] || fail "bootstrap rerun after kill $i: exit $rc"
  note "bootstrap kill $i: rerun exit 0"
done
verify_ok "after $bootstrap_kills bootstrap kills"

# --- SIGKILLs of run at random moments.
run_kills=0 kills_in_big=0 kills_after_commit=0 kills_streamed=0
for i in $(seq 1 "$KILLS"); do
  case $((i % 10)) in
    3) # inside a 300k-row transaction
      psql_src $DB -c "INSERT INTO events SELECT 'bulk', g % 5, 'bulk' FROM generate_series(1, 300000) g"
      "$PGSYNC" -c "$cfg" run >>"$LOG" 2>&1 &
      pid=$!
      wait_for 60 "the bulk transaction on the target" bulk_applying || true
      sleep_ms "$(rand_ms 0 300)"
      kills_in_big=$((kills_in_big + 1)) ;;
    7) # while a streamed transaction is spooled (still open on the source),
       # then while the next run applies it: logical_decoding_work_mem at
       # its minimum makes the source stream it (protocol version 2)
      psql_src postgres -c "ALTER SYSTEM SET logical_decoding_work_mem = '64kB'" -c "SELECT pg_reload_conf()" >/dev/null
      "$PGSYNC" -c "$cfg" run >>"$LOG" 2>&1 &
      pid=$!
      psql_src $DB -c "BEGIN" -c "INSERT INTO events SELECT 'streamed', g % 5, 'streamed' FROM generate_series(1, 200000) g" \
        -c "SELECT pg_sleep(3)" -c "COMMIT" >/dev/null &
      big=$!
      # The transaction is streamed: its spool file exists, and (the
      # default apply_streamed) a second target session writes it.
      wait_for 30 "run to spool the streamed transaction" spooling
      sleep_ms "$(rand_ms 0 1000)"
      kill -9 "$pid" 2>/dev/null || fail "run exited before the kill while spooling"
      wait "$pid" 2>/dev/null || true
      run_kills=$((run_kills + 1))
      wait "$big" || fail "the streamed transaction failed on the source"
      "$PGSYNC" -c "$cfg" run >>"$LOG" 2>&1 &
      pid=$!
      wait_for 60 "the streamed transaction on the target" bulk_applying || true
      sleep_ms "$(rand_ms 0 300)"
      psql_src postgres -c "ALTER SYSTEM RESET logical_decoding_work_mem" -c "SELECT pg_reload_conf()" >/dev/null
      kills_streamed=$((kills_streamed + 1)) ;;
    6|9) # right after a target commit, before the feedback that follows it
      "$PGSYNC" -c "$cfg" run >>"$LOG" 2>&1 &
      pid=$!
      before=$(progress_lsn)
      end=$((SECONDS + 30))
      while [ "$(progress_lsn)" = "$before" ] && [ $SECONDS -lt $end ]; do :; done
      kills_after_commit=$((kills_after_commit + 1)) ;;
    *)
      "$PGSYNC" -c "$cfg" run >>"$LOG" 2>&1 &
      pid=$!
      sleep_ms "$(rand_ms 200 3000)" ;;
  esac
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  run_kills=$((run_kills + 1))
done
note "run kills: $run_kills ($kills_in_big inside a 300k-row transaction, $kills_after_commit right after a target commit, $kills_streamed pairs while a streamed transaction was spooled, then applied)"
verify_ok "after $run_kills run kills"

# --- Server restarts and a frozen target, with run streaming throughout.
"$PGSYNC" -c "$cfg" run >"$RESULTS/faults-run.log" 2>&1 &
run_pid=$!
restart() { # restart CLUSTER MODE
  local c=$1 m=$2
  as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
  as_pg "$bindir/pg_ctl" -D "$PGSYNC_PG_DIR/$c" -m "$m" -w -t 120 restart -l "$PGSYNC_PG_DIR/$c.log" >/dev/null
}
restarts=()
for step in "source fast" "source immediate" "target fast" "target immediate"; do
  sleep 3
  # shellcheck disable=SC2086
  restart $step || fail "restart $step"
  sleep 5
  kill -0 "$run_pid" 2>/dev/null || fail "run exited after the $step restart: $(tail -3 "$RESULTS/faults-run.log")"
  restarts+=("$step")
  note "restart $step: run still streaming"
done
frozen=$(head -1 "$PGSYNC_PG_DIR/target/postmaster.pid")
kill -STOP "$frozen"
sleep 45
kill -CONT "$frozen"
frozen=""
sleep 5
kill -0 "$run_pid" 2>/dev/null || fail "run exited after the target was frozen: $(tail -3 "$RESULTS/faults-run.log")"
note "target postmaster frozen 45 s: run still streaming"

# --- A second run of the same job: refused within 5 s, the first undisturbed.
slot_active() { [ "$(val_src $DB "SELECT active FROM pg_replication_slots WHERE slot_name = 'pgsync_faults'")" = t ]; }
wait_for 90 "the first run to stream again" slot_active
t0=$(now); rc=0
timeout 30 "$PGSYNC" -c "$cfg" run >"$RESULTS/faults-second-run.log" 2>&1 || rc=$?
second_secs=$(elapsed "$t0" "$(now)")
[ $rc -eq 1 ] || fail "second run: exit $rc, want 1"
awk -v s="$second_secs" 'BEGIN { exit !(s < 5) }' || fail "second run took ${second_secs}s"
grep -q "in use" "$RESULTS/faults-second-run.log" || fail "second run: $(cat "$RESULTS/faults-second-run.log")"
kill -0 "$run_pid" 2>/dev/null || fail "the first run exited when the second started"
note "second run: exit 1 in ${second_secs}s: $(tail -1 "$RESULTS/faults-second-run.log")"
kill -TERM "$run_pid"
rc=0; wait_exit "$run_pid" 30 || rc=$?
[ $rc -eq 0 ] || fail "run after SIGTERM: exit $rc"
grep -c "reconnected" "$RESULTS/faults-run.log" | xargs -I{} echo "faults: the streaming run reconnected {} times" | tee -a "$LOG"
verify_ok "after restarts, freeze and a second run"
stop_load

# --- The target rejects a change: a CHECK the source lacks.
psql_tgt $DB -c "ALTER TABLE ledger ADD CONSTRAINT no_7777 CHECK (delta <> 7777)"
before_bad=$(val_src $DB "SELECT pg_current_wal_lsn()")
psql_src $DB -c "INSERT INTO ledger (acct, delta) VALUES (1, 7777)" -c "INSERT INTO events VALUES ('after', 1, 'after')"
rc=0; timeout 120 "$PGSYNC" -c "$cfg" run --until-caught-up >"$RESULTS/faults-reject.log" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "run on a rejected change: exit $rc, want 1"
err=$(tail -1 "$RESULTS/faults-reject.log")
for want in public.ledger no_7777 "at "; do
  case "$err" in *"$want"*) ;; *) fail "rejected change: error does not name '$want': $err" ;; esac
done
[ "$(val_src postgres "SELECT '$(slot_confirmed)'::pg_lsn <= '$before_bad'::pg_lsn")" = t ] || fail "the slot passed the rejected transaction"
[ "$(val_tgt $DB "SELECT count(*) FROM events WHERE kind = 'after'")" = 0 ] || fail "a transaction after the rejected one was applied"
note "rejected change: exit 1: $err"
psql_tgt $DB -c "ALTER TABLE ledger DROP CONSTRAINT no_7777"
verify_ok "after the operator dropped the constraint"

# --- The target rejects a change inside a group of transactions (issue 23):
# a backlog is applied several source transactions to a target
# transaction; the 21st fails. run stops exactly there: the 20 before it
# are committed, it and the 5 after are not.
psql_tgt $DB -c "ALTER TABLE ledger ADD CONSTRAINT no_8888 CHECK (delta <> 8888)"
for i in $(seq 1 20); do psql_src $DB -c "INSERT INTO events VALUES ('group-before', $i, 'g')" >/dev/null; done
psql_src $DB -c "INSERT INTO ledger (acct, delta) VALUES (1, 8888)" >/dev/null
for i in $(seq 1 5); do psql_src $DB -c "INSERT INTO events VALUES ('group-after', $i, 'g')" >/dev/null; done
rc=0; timeout 120 "$PGSYNC" -c "$cfg" run --until-caught-up >"$RESULTS/faults-reject-group.log" 2>&1 || rc=$?
[ $rc -eq 1 ] || fail "run on a rejected change inside a group: exit $rc, want 1"
grep -q "no_8888" "$RESULTS/faults-reject-group.log" || fail "rejected change inside a group: $(tail -1 "$RESULTS/faults-reject-group.log")"
before_n=$(val_tgt $DB "SELECT count(*) FROM events WHERE kind = 'group-before'")
after_n=$(val_tgt $DB "SELECT count(*) FROM events WHERE kind = 'group-after'")
[ "$before_n" = 20 ] && [ "$after_n" = 0 ] || fail "rejected change inside a group: $before_n of the 20 transactions before it and $after_n of the 5 after it on the target, want 20 and 0"
grep -q "failed inside a group" "$RESULTS/faults-reject-group.log" || fail "rejected change inside a group: the group was not split (no group of transactions formed?)"
note "rejected change inside a group: exit 1, the 20 transactions before it committed, none after: $(tail -1 "$RESULTS/faults-reject-group.log")"
psql_tgt $DB -c "ALTER TABLE ledger DROP CONSTRAINT no_8888"
verify_ok "after the operator dropped the second constraint"

# --- Slot problems while pgsync is down: invalidated, then dropped by hand.
psql_src postgres -c "ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'" -c "SELECT pg_reload_conf()" >/dev/null
psql_src $DB -c "CREATE SCHEMA IF NOT EXISTS scratch" -c "CREATE TABLE IF NOT EXISTS scratch.unpublished (pad text)"
for _ in 1 2 3 4; do
  psql_src $DB -c "INSERT INTO scratch.unpublished SELECT repeat('w', 1000) FROM generate_series(1, 20000)" -c "SELECT pg_switch_wal()" -c "CHECKPOINT" >/dev/null
done
[ "$(val_src $DB "SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'pgsync_faults'")" = lost ] || fail "the slot was not invalidated"
rc=0; timeout 60 "$PGSYNC" -c "$cfg" run >"$RESULTS/faults-invalidated.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "invalidated" "$RESULTS/faults-invalidated.log" && grep -q "bootstrap --force" "$RESULTS/faults-invalidated.log" ||
  fail "run on an invalidated slot: exit $rc: $(tail -1 "$RESULTS/faults-invalidated.log")"
pgsync status >"$RESULTS/faults-status-invalidated.txt"
grep -q "problem:.*invalidated.*bootstrap --force" "$RESULTS/faults-status-invalidated.txt" || fail "status on an invalidated slot: $(cat "$RESULTS/faults-status-invalidated.txt")"
note "invalidated slot: run exit 1: $(tail -1 "$RESULTS/faults-invalidated.log")"
psql_src postgres -c "ALTER SYSTEM RESET max_slot_wal_keep_size" -c "SELECT pg_reload_conf()" >/dev/null
psql_src $DB -c "SELECT pg_drop_replication_slot('pgsync_faults')" >/dev/null
rc=0; timeout 60 "$PGSYNC" -c "$cfg" run >"$RESULTS/faults-dropped.log" 2>&1 || rc=$?
[ $rc -eq 1 ] && grep -q "does not exist" "$RESULTS/faults-dropped.log" ||
  fail "run on a dropped slot: exit $rc: $(tail -1 "$RESULTS/faults-dropped.log")"
pgsync status >"$RESULTS/faults-status-dropped.txt"
grep -q "problem:.*does not exist.*bootstrap --force" "$RESULTS/faults-status-dropped.txt" || fail "status on a dropped slot"
note "dropped slot: run exit 1: $(tail -1 "$RESULTS/faults-dropped.log")"
rc=0; timeout 600 "$PGSYNC" -c "$cfg" bootstrap --force >>"$LOG" 2>&1 || rc=$?
[ $rc -eq 0 ] || fail "bootstrap --force after the slot was dropped: exit $rc"
verify_ok "after bootstrap --force"

cat >"$RESULTS/faults.json" <<JSON
{
  "benchmark": "faults",
  "command": "FAULT_SEED=$SEED FAULT_KILLS=$KILLS scripts/reliability/faults.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "seed": $SEED,
  "bootstrap_kills": $bootstrap_kills,
  "run_kills": $run_kills,
  "run_kills_inside_300k_row_txn": $kills_in_big,
  "run_kills_after_target_commit": $kills_after_commit,
  "run_kill_pairs_streamed_txn": $kills_streamed,
  "restarts": ["source fast", "source immediate", "target fast", "target immediate"],
  "target_frozen_seconds": 45,
  "second_run_exit": 1,
  "second_run_seconds": $second_secs,
  "rejected_change_exit": 1,
  "rejected_change_inside_group": "20 before committed, 0 after",
  "invalidated_slot_exit": 1,
  "dropped_slot_exit": 1,
  "every_verify_identical": true
}
JSON
note "all faults passed"
cat "$RESULTS/faults.json"
