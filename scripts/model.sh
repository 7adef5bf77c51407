#!/usr/bin/env bash
# The lifecycle model test (test/integration/model_test.go) run longer than
# make test runs it: MODEL_SEQUENCES (default 40) seeded sequences of
# MODEL_STEPS (default 16) commands from MODEL_SEED (default 1000), on
# clusters of its own (ports 26632/26633). Writes the outcome and every
# step to bench-results/reliability/model.txt; exits 1 when a sequence
# fails. docs/reliability.md quotes the latest result.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/install-pg.sh
out=${RESULTS:-$root/bench-results}/reliability/model.txt
mkdir -p "$(dirname "$out")"
seqs=${MODEL_SEQUENCES:-40} steps=${MODEL_STEPS:-16} seed=${MODEL_SEED:-1000}
began=$(date -u +%FT%TZ)
rc=0
PGSYNC_MODEL_SEQUENCES=$seqs PGSYNC_MODEL_STEPS=$steps PGSYNC_MODEL_SEED=$seed \
  PGSYNC_TEST_PG_DIR=/tmp/pgsync-model-pg PGSYNC_TEST_SOURCE_PORT=26632 PGSYNC_TEST_TARGET_PORT=26633 \
  timeout 60m go test -tags integration -count=1 -timeout 55m -run '^TestLifecycleModel$' -v ./test/integration/ >"$out.log" 2>&1 || rc=$?
{
  echo "# scripts/model.sh at $(git rev-parse --short HEAD) from $began to $(date -u +%FT%TZ)"
  echo "# $seqs sequences of $steps steps, seeds $seed-$((seed + seqs - 1)); exit $rc"
  echo "passed sequences: $(grep -c -- '--- PASS: TestLifecycleModel/' "$out.log" || true)"
  echo "failed sequences: $(grep -c -- '--- FAIL: TestLifecycleModel/' "$out.log" || true)"
  echo "steps run: $(grep -c 'model_test.go:[0-9]*: step' "$out.log" || true)"
  echo "faults: source down $(grep -c 'fault "source down"' "$out.log" || true), killed $(grep -c 'fault "kill"' "$out.log" || true)"
  echo "refusals (exit 1, nothing recorded): $(grep -c 'fault "": exit 1' "$out.log" || true)"
  echo
  grep -v '^=== ' "$out.log"
} >"$out"
rm -f "$out.log"
head -7 "$out"
exit $rc
