#!/usr/bin/env bash
# The soak: SOAK_MINUTES (default 40) of steady writes at SOAK_RATE (default
# 200) transactions a second, applied by one `pgsync run`, sampled every
# second: pgsync's RSS and CPU, the slot's lag in bytes, and the statements
# prepared on the target (pgsync's progress lines). Then the target must
# equal the source. Then SOAK_IDLE_MINUTES (default 10) of writes only to an
# unpublished table: the WAL the slot retains must stay under 16 MB.
# Writes bench-results/soak.json, soak-*.csv and soak.log.
set -euo pipefail
export PGSYNC_PG_DIR=${PGSYNC_PG_DIR:-/tmp/pgsync-soak-pg}
export PGSYNC_SOURCE_PORT=${PGSYNC_SOURCE_PORT:-60432}
export PGSYNC_TARGET_PORT=${PGSYNC_TARGET_PORT:-60433}
source "$(dirname "$0")/lib.sh"
MINUTES=${SOAK_MINUTES:-40}
IDLE_MINUTES=${SOAK_IDLE_MINUTES:-10}
RATE=${SOAK_RATE:-200}
ROWS=${SOAK_ROWS:-200000}
drill_setup
built_at=$(cd "$root" && git rev-parse --short HEAD) # the commit of the pgsync that runs
DRILL_ON_EXIT='bash "$root/scripts/local-pg.sh" destroy >/dev/null 2>&1'

DB=soak
fresh_db $DB
load_dataset $DB "$ROWS"
psql_src $DB -c "CREATE TABLE unpublished (id bigserial PRIMARY KEY, pad text)"
cfg=$RESULTS/soak.toml
write_config "$cfg" soak $DB $DB '"public.bench_*"'
"$PGSYNC" -c "$cfg" bootstrap >/dev/null 2>"$RESULTS/soak-bootstrap.log"
txn_script "$RESULTS/soak-txn.sql" "$ROWS" 4 2 2 1

echo "soak: ${MINUTES} min at ${RATE} txn/s, then ${IDLE_MINUTES} idle min"
"$PGSYNC" -c "$cfg" run --log-every 1s 2>"$RESULTS/soak.log" &
run_pid=$!
SAMPLE_SECONDS=1 sample_proc "$run_pid" "$RESULTS/soak-rss.csv" &
# lag and retained WAL every second, from the source
sample_slot() {
  echo "unix_s,lag_bytes,retained_bytes" >"$1"
  while kill -0 "$run_pid" 2>/dev/null; do
    val_src $DB "SELECT extract(epoch FROM now())::numeric(20,3) || ',' ||
      pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint || ',' ||
      pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint
      FROM pg_replication_slots WHERE slot_name = 'pgsync_soak'" >>"$1" 2>/dev/null || true
    sleep 1
  done
}
sample_slot "$RESULTS/soak-slot.csv" &
t_start=$(now)
timeout $((MINUTES * 60 + 30)) "$bindir/pgbench" -n -h 127.0.0.1 -p "$SRC_PORT" -U postgres -c 4 -j 2 -R "$RATE" -T $((MINUTES * 60)) \
  -f "$RESULTS/soak-txn.sql" $DB >"$RESULTS/soak-pgbench.log" 2>&1
t_load_end=$(now)
wait_for 120 "pgsync to catch up" lsn_ge_slot pgsync_soak "$(val_src $DB "SELECT pg_current_wal_lsn()")"
if "$PGSYNC" -c "$cfg" verify >"$RESULTS/soak-verify.txt"; then match=true; else match=false; fi

# Idle: writes only to a table the job does not publish.
t_idle=$(now)
timeout $((IDLE_MINUTES * 60 + 30)) "$bindir/pgbench" -n -h 127.0.0.1 -p "$SRC_PORT" -U postgres -c 1 -R 50 -T $((IDLE_MINUTES * 60)) \
  -f <(echo "INSERT INTO unpublished (pad) VALUES (repeat('u', 200));") $DB >"$RESULTS/soak-idle-pgbench.log" 2>&1
t_end=$(now)
kill -TERM "$run_pid"
wait_exit "$run_pid" 30 || true
sleep 1.5 # the samplers see the exit

# Figures.
reconnects=$(grep -c "msg=reconnected" "$RESULTS/soak.log" || true)
tps=$(awk '/^tps = / {print $3; exit}' "$RESULTS/soak-pgbench.log")
quarters=$(awk -F, -v a="$t_start" -v b="$t_load_end" 'NR > 1 && $1 >= a && $1 <= b {
    q = int(($1 - a) / ((b - a) / 4)); if (q > 3) q = 3; n[q]++; s[q] += $2; if ($2 > p[q]) p[q] = $2 }
  END { for (q = 0; q < 4; q++) printf "%s{\"quarter\": %d, \"rss_avg_mb\": %.1f, \"rss_peak_mb\": %.1f}", (q ? ", " : ""), q + 1, (n[q] ? s[q] / n[q] / 1024 : 0), p[q] / 1024 }' "$RESULTS/soak-rss.csv")
max_lag=$(awk -F, -v a="$t_start" -v b="$t_load_end" 'NR > 1 && $1 >= a && $1 <= b && $2 > m { m = $2 } END { print m + 0 }' "$RESULTS/soak-slot.csv")
max_retained_idle=$(awk -F, -v a="$t_idle" -v b="$t_end" 'NR > 1 && $1 >= a && $1 <= b && $3 > m { m = $3 } END { print m + 0 }' "$RESULTS/soak-slot.csv")
# The slot's restart_lsn moves only when the walsender decodes a
# running-transactions record (every 15 s while the server is busy): WAL
# retained at the end of the load phase is released within the idle phase's
# first such records. Both figures are reported; the check is on the idle
# phase after its first 30 s.
max_retained_idle_settled=$(awk -F, -v a="$t_idle" -v b="$t_end" 'NR > 1 && $1 >= a + 30 && $1 <= b && $3 > m { m = $3 } END { print m + 0 }' "$RESULTS/soak-slot.csv")
prepared_max=$(grep -o 'prepared_statements=[0-9]*' "$RESULTS/soak.log" | cut -d= -f2 | sort -n | tail -1)
prepared_last=$(grep -o 'prepared_statements=[0-9]*' "$RESULTS/soak.log" | cut -d= -f2 | tail -1)
cpu_avg=$(rss_stats "$RESULTS/soak-rss.csv" | awk '{print $3}')
need prepared_max prepared_last
cat >"$RESULTS/soak.json" <<JSON
{
  "benchmark": "soak",
  "command": "SOAK_MINUTES=$MINUTES SOAK_IDLE_MINUTES=$IDLE_MINUTES SOAK_RATE=$RATE scripts/reliability/soak.sh",
  "date": "$(date -u +%FT%TZ)",
$(env_json),
  "minutes": $MINUTES,
  "rate_txn_per_s": $RATE,
  "pgbench_tps": ${tps:-null},
  "rss_by_quarter": [$quarters],
  "cpu_avg_pct": $cpu_avg,
  "max_lag_bytes": $max_lag,
  "reconnects": $reconnects,
  "prepared_statements_max": ${prepared_max},
  "prepared_statements_last": ${prepared_last},
  "hashes_match": $match,
  "idle_minutes": $IDLE_MINUTES,
  "idle_max_retained_wal_bytes": $max_retained_idle,
  "idle_max_retained_wal_bytes_after_30s": $max_retained_idle_settled,
  "pgsync_built_at": "$built_at"
}
JSON
cat "$RESULTS/soak.json"
[ "$match" = true ] && [ "$reconnects" = 0 ] && [ "$max_retained_idle_settled" -lt $((16 << 20)) ]
