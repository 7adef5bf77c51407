#!/usr/bin/env bash
# Every benchmark behind docs/benchmarks.md and its details page, one after
# the other, at the commit checked out, then the pages themselves
# (scripts/bench). Its longest parts are the 10 GB copy (needs ~45 GB
# free) and the three-run whole move; it was last run whole before the
# harness took the ported scenarios over. Run it on an idle machine: every figure is a ratio
# between contenders measured minutes apart, and anything else running
# skews them.
#   bash scripts/bench-all.sh
# BEFORE_COPY_RUNS names the commit the COPY-runs comparison runs against
# (the last one that applied long INSERT runs as multi-row INSERTs);
# BEFORE_STREAMING the one stream-bench compares with (before streamed
# transactions were applied as they arrive).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
orchestrate bench-all
R=$RESULTS
BEFORE_COPY_RUNS=${BEFORE_COPY_RUNS:-2ba6cfc}
BEFORE_STREAMING=${BEFORE_STREAMING:-28d8e87}
# earlier COMMIT: a build of COMMIT, in a worktree removed at the end.
earlier=$(mktemp -d)
trap 'for t in "$earlier"/*/src; do git worktree remove --force "$t" 2>/dev/null || true; done; rm -rf "$earlier"' EXIT
build_earlier() {
  git worktree add -q --detach "$earlier/$1/src" "$1"
  (cd "$earlier/$1/src" && go build -trimpath -ldflags "-X github.com/pgsync/pgsync/cmd.Version=$1" -o "$earlier/$1/pgsync" ./cmd/pgsync)
  echo "$earlier/$1/pgsync"
}

step "hot path against bfb5f65"
RESULTS=$R bash scripts/hotpath-bench.sh >/dev/null

step "the whole move under load (pgsync, native, pgcopydb --follow)"
harness move -out "$R/move"

for ds in 100MB 1GB; do
  step "bench.sh DATASET=$ds"
  DATASET=$ds RESULTS=$R bash scripts/bench.sh
done
step "pk-bench.sh, on the 1GB dataset bench.sh left on the source"
RESULTS=$R bash scripts/pk-bench.sh >/dev/null

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

step "copy: one 8M-row table, 1, 2 and 4 streams"
harness copy -out "$R"
step "copy: 10 GB in two tables"
harness copy -rows 80000000 -tables 2 -compare=false -streams 2 -out "$R/copy-10gb"

step "bigtxn: 2,000,000 rows"
harness bigtxn -rows 2000000 -out "$R"
step "bigtxn: COPY runs against $BEFORE_COPY_RUNS, interleaved"
before=$(build_earlier "$BEFORE_COPY_RUNS")
for run in 1-before-copy-runs 2-copy-runs 3-before-copy-runs 4-copy-runs; do
  pgsync=$root/bin/pgsync
  case $run in *before*) pgsync=$before ;; esac
  PGSYNC=$pgsync harness bigtxn -out "$R/bigtxn-runs/$run"
done

step "stream-bench.sh against $BEFORE_STREAMING"
SIZES="1000000 5000000" RUNS=1 PGSYNC_BASE=$(build_earlier "$BEFORE_STREAMING") RESULTS=$R bash scripts/stream-bench.sh >/dev/null
step "rtt: the catch-up at 0, 2 and 10 ms round trips, 3 runs"
harness rtt -rtts 0,2,10 -runs 3 -out "$R"
for ms in 0 2 10; do
  step "bench.sh DATASET=100MB RTT_MS=$ms"
  RTT_MS=$ms DATASET=100MB CDC_SECONDS=10 RESULTS=$R/rtt-copy/${ms}ms bash scripts/bench.sh >/dev/null
done
step "freeze"
harness freeze -out "$R"
step "schema: beside pg_dump and pgcopydb"
harness schema -out "$R"
step "verify: verify --rows beside the copy"
harness verify -out "$R"
step "cutover-gap-bench.sh"
RESULTS=$R bash scripts/cutover-gap-bench.sh >/dev/null

step "insert-copy-bench"
bash scripts/local-pg.sh start >/dev/null
go run ./scripts/insert-copy-bench -url "postgres://postgres@127.0.0.1:$PGSYNC_TARGET_PORT/postgres" >"$R/insert-copy.jsonl"
bash scripts/local-pg.sh stop >/dev/null

(cd scripts/bench && go run ./page -root ../..)
step "done: docs/benchmarks.md and docs/benchmarks-details.md written from $R"
