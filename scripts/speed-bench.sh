#!/usr/bin/env bash
# The benchmarks of the speed issue (issue 18), one after the other at the
# commit checked out, then docs/benchmarks.md (scripts/bench):
#   stream-bench.sh   one 1M- and one 5M-row transaction while streaming,
#                     against BASE's build (before streaming was applied as
#                     it arrives) and native with streaming = on
#   catchup-bench.sh  the catch-up backlog, then again with a CPU profile
#   rtt-bench.sh      the catch-up at 0, 2 and 10 ms round trips, 3 runs
#   bench.sh          the two-table copy (100MB) at 0, 2 and 10 ms
#   freeze-bench.sh   the first VACUUM (FREEZE) after a load, with and
#                     without COPY FREEZE, on the 1 GB dataset
#   schema-bench.sh   a whole database into an empty target, beside
#                     pg_dump + native and pgcopydb
# About 35 minutes on a 2-core machine. Run it on an idle machine.
#   bash scripts/speed-bench.sh
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
orchestrate speed-bench
R=$RESULTS
BASE=${BASE:-28d8e87}
base=$(mktemp -d)
trap 'git worktree remove --force "$base/src" 2>/dev/null || true; rm -rf "$base"' EXIT
git worktree add -q --detach "$base/src" "$BASE"
(cd "$base/src" && go build -trimpath -o "$base/pgsync" ./cmd/pgsync)

step "stream-bench.sh against $BASE"
SIZES="1000000 5000000" RUNS=1 PGSYNC_BASE=$base/pgsync RESULTS=$R bash scripts/stream-bench.sh >/dev/null
step "catchup-bench.sh"
RESULTS=$R bash scripts/catchup-bench.sh >/dev/null
step "catchup-bench.sh with a CPU profile"
PGSYNC_RUN_FLAGS="--cpuprofile $R/catchup-profile/pgsync-cpu.pprof --allocprofile $R/catchup-profile/pgsync-allocs.pprof" RESULTS=$R/catchup-profile bash scripts/catchup-bench.sh >/dev/null
go tool pprof -top -nodecount 40 bin/pgsync "$R/catchup-profile/pgsync-cpu.pprof" >"$R/catchup-profile/pprof-top.txt" 2>/dev/null
go tool pprof -sample_index=alloc_space -top -nodecount 12 bin/pgsync "$R/catchup-profile/pgsync-allocs.pprof" >"$R/catchup-profile/pprof-allocs.txt" 2>/dev/null
step "rtt-bench.sh"
RTTS="0 2 10" RUNS=3 RESULTS=$R bash scripts/rtt-bench.sh >/dev/null
for ms in 0 2 10; do
  step "bench.sh DATASET=100MB RTT_MS=$ms"
  RTT_MS=$ms DATASET=100MB CDC_SECONDS=10 RESULTS=$R/rtt-copy/${ms}ms bash scripts/bench.sh >/dev/null
done
step "freeze-bench.sh"
RESULTS=$R bash scripts/freeze-bench.sh >/dev/null
step "schema-bench.sh"
RESULTS=$R bash scripts/schema-bench.sh >/dev/null
(cd scripts/bench && go run ./page -root ../..)
step "done: docs/benchmarks.md and docs/benchmarks-details.md written from $R"
