#!/usr/bin/env bash
# Every benchmark behind docs/benchmarks.md, one after the other, at the
# commit checked out, then the pages themselves (scripts/bench).
# About 75 minutes on a 2-core machine; needs ~45 GB free for the 10 GB copy.
# Run it on an idle machine: every figure is a ratio between contenders
# measured minutes apart, and anything else running skews them.
#   bash scripts/bench-all.sh
# BEFORE_COPY_RUNS names the commit the COPY-runs comparison runs against
# (the last one that applied long INSERT runs as multi-row INSERTs).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
orchestrate bench-all
R=$RESULTS
BEFORE_COPY_RUNS=${BEFORE_COPY_RUNS:-2ba6cfc}

step "hot path against bfb5f65"
RESULTS=$R bash scripts/hotpath-bench.sh >/dev/null

step "the whole move under load (pgsync, native, pgcopydb --follow)"
(cd scripts/bench && go run ./harness -root ../.. move -out "$R/move")

for ds in 100MB 1GB; do
  step "bench.sh DATASET=$ds"
  DATASET=$ds RESULTS=$R bash scripts/bench.sh
done

# The reader's pause, interleaved with runs without it.
for run in 1-pause 2-nopause 3-pause 4-nopause; do
  flags=""
  case $run in *nopause) flags="--read-pause-queued -1" ;; esac
  step "catchup-bench.sh $run"
  PGSYNC_RUN_FLAGS="$flags" RESULTS=$R/catchup-runs/$run bash scripts/catchup-bench.sh
done
step "catchup-bench.sh with a CPU profile"
PGSYNC_RUN_FLAGS="--cpuprofile $R/catchup-profile/pgsync-cpu.pprof --allocprofile $R/catchup-profile/pgsync-allocs.pprof" RESULTS=$R/catchup-profile bash scripts/catchup-bench.sh
go tool pprof -top -nodecount 40 bin/pgsync "$R/catchup-profile/pgsync-cpu.pprof" >"$R/catchup-profile/pprof-top.txt" 2>/dev/null
go tool pprof -sample_index=alloc_space -top -nodecount 12 bin/pgsync "$R/catchup-profile/pgsync-allocs.pprof" >"$R/catchup-profile/pprof-allocs.txt" 2>/dev/null

step "copy-bench.sh: one 8M-row table, 1, 2 and 4 streams"
RESULTS=$R bash scripts/copy-bench.sh
step "copy-bench.sh: 10 GB in two tables"
ROWS=80000000 TABLES=2 COMPARE=0 STREAMS=2 RESULTS=$R/copy-10gb bash scripts/copy-bench.sh

step "bigtxn-bench.sh: 2,000,000 rows"
BIG_ROWS=2000000 RESULTS=$R bash scripts/bigtxn-bench.sh
step "bigtxn-bench.sh: COPY runs against $BEFORE_COPY_RUNS, interleaved"
before=$(mktemp -d)
trap 'git worktree remove --force "$before/src" 2>/dev/null || true; rm -rf "$before"' EXIT
git worktree add -q --detach "$before/src" "$BEFORE_COPY_RUNS"
(cd "$before/src" && go build -trimpath -o "$before/pgsync" ./cmd/pgsync)
for run in 1-before-copy-runs 2-copy-runs 3-before-copy-runs 4-copy-runs; do
  pgsync=$root/bin/pgsync
  case $run in *before*) pgsync=$before/pgsync ;; esac
  PGSYNC=$pgsync RESULTS=$R/bigtxn-runs/$run bash scripts/bigtxn-bench.sh
done

step "pk-bench.sh"
RESULTS=$R bash scripts/pk-bench.sh >/dev/null
step "insert-copy-bench"
go run ./scripts/insert-copy-bench -url "postgres://postgres@127.0.0.1:${PGSYNC_TARGET_PORT:-57433}/postgres" >"$R/insert-copy.jsonl"

(cd scripts/bench && go run ./page -root ../..)
step "done: docs/benchmarks.md and docs/benchmarks-details.md written from $R"
