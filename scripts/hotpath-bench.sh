#!/usr/bin/env bash
# Hot-path benchmarks (no server) of this working tree against BASE, run
# interleaved on one pinned CPU: this machine's speed drifts within the
# hour, so only runs taken in the same minutes compare.
#   BASE=bfb5f65 ROUNDS=20 scripts/hotpath-bench.sh
# Writes bench-results/hotpath.txt, hotpath-$BASE.txt,
# hotpath-benchstat.txt (benchstat BASE vs this tree) and a CPU profile of
# one benchmark, hotpath-update_key_change-pprof.txt.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
BASE=${BASE:-bfb5f65}
ROUNDS=${ROUNDS:-20}
CPU=${CPU:-1}
BENCHSTAT=${BENCHSTAT:-$(command -v benchstat || echo "$HOME/go/bin/benchstat")}
[ -x "$BENCHSTAT" ] || (cd "$root" && go install golang.org/x/perf/cmd/benchstat@latest)
BENCHSTAT=$(command -v benchstat || echo "$HOME/go/bin/benchstat")

work=$(mktemp -d)
cleanup() { git -C "$root" worktree remove --force "$work/base" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

git -C "$root" worktree add -q --detach "$work/base" "$BASE"
for pkg in pgoutput apply; do
  (cd "$work/base" && go test -c -o "$work/base-$pkg.test" "./$pkg")
  (cd "$root" && go test -c -o "$work/head-$pkg.test" "./$pkg")
done

run() { # run BINARY-PREFIX OUT
  for pkg in pgoutput apply; do
    (cd "$root/$pkg" && taskset -c "$CPU" "$1-$pkg.test" -test.run '^$' -test.bench . -test.benchmem -test.benchtime 1000000x) >>"$2"
  done
}
: >"$RESULTS/hotpath-$BASE.txt"
: >"$RESULTS/hotpath.txt"
for i in $(seq "$ROUNDS"); do
  run "$work/base" "$RESULTS/hotpath-$BASE.txt"
  run "$work/head" "$RESULTS/hotpath.txt"
done
"$BENCHSTAT" "$RESULTS/hotpath-$BASE.txt" "$RESULTS/hotpath.txt" | tee "$RESULTS/hotpath-benchstat.txt"
# Where an UPDATE that changes its key spends its time (docs/benchmarks.md).
(cd "$root/apply" && taskset -c "$CPU" "$work/head-apply.test" -test.run '^$' -test.bench 'DecodeAndBind/update_key_change$' \
  -test.benchtime 20000000x -test.cpuprofile "$work/update_key_change.pprof" >/dev/null)
go tool pprof -top -nodecount 25 "$work/head-apply.test" "$work/update_key_change.pprof" >"$RESULTS/hotpath-update_key_change-pprof.txt" 2>/dev/null
