#!/usr/bin/env bash
# The cutover's kill model (test/integration/cutoverkill_test.go) at every
# kill point, not the seeded sample make test runs: each of the three
# cutovers of a move (forward with the way back, the rollback, forward
# again) killed with SIGKILL after each of its statements in turn, then
# rerun, on clusters of its own (ports 26652/26653). Writes the counts and
# every point's outcome to bench-results/reliability/cutover-kill.txt; exits
# 1 when a point fails. docs/reliability.md quotes the latest result.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-pg.sh
out=${RESULTS:-$root/bench-results}/reliability/cutover-kill.txt
mkdir -p "$(dirname "$out")"
began=$(date -u +%FT%TZ)
commit=$(git rev-parse --short HEAD)
rc=0
PGSYNC_CUTOVER_KILL_ALL=1 \
  PGSYNC_TEST_PG_DIR=/tmp/pgsync-cutover-kill-pg PGSYNC_TEST_SOURCE_PORT=26652 PGSYNC_TEST_TARGET_PORT=26653 \
  timeout 100m go test -tags integration -count=1 -timeout 95m -run '^TestCutoverKillModel$' -v ./test/integration/ >"$out.log" 2>&1 || rc=$?
{
  echo "# scripts/cutover-kill-model.sh at $commit from $began to $(date -u +%FT%TZ); exit $rc"
  grep -m1 'statements: ' "$out.log" | sed 's/^ *cutoverkill_test.go:[0-9]*: //' || true
  for c in forward_reverse rollback forward_again; do
    echo "$c: passed $(grep -c -- "--- PASS: TestCutoverKillModel/$c/" "$out.log" || true), failed $(grep -c -- "--- FAIL: TestCutoverKillModel/$c/" "$out.log" || true), killed $(grep -c "$c killed after statement" "$out.log" || true), not killed (fewer statements) $(grep -c "$c ran [0-9]* statements, not" "$out.log" || true)"
  done
  echo
  grep -v '^=== ' "$out.log"
} >"$out"
rm -f "$out.log"
head -6 "$out"
exit $rc
