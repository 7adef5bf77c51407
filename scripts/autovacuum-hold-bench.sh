#!/usr/bin/env bash
# What holding autovacuum off the target tables during the copy saves: the
# one-table copy of the harness's copy scenario (8M rows, 2 streams, pgsync
# only) by a build of BASE, which has no hold, and by this tree's,
# interleaved. For each run:
# the copy and primary key build seconds from the bootstrap log, the total
# and the target's CPU from copy.json, and how many autovacuum tasks the
# target cancelled during the run (an index build that found autovacuum on
# its table waited deadlock_timeout for that).
#   BASE=00286dc ROUNDS=3 bash scripts/autovacuum-hold-bench.sh
#   TABLES=2 COMPARE=1 ROUNDS=2 ...   the two 4M-row tables (the 1GB dataset
#                                     of bench.sh), with native's copy in
#                                     each run
# Writes bench-results/experiments/autovacuum-hold/runs.jsonl (with
# TABLES=2: runs-2-tables.jsonl) and keeps each run's bootstrap log there.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
BASE=${BASE:-00286dc}
ROUNDS=${ROUNDS:-3}
TABLES=${TABLES:-1}
COMPARE=${COMPARE:-0}
out="$RESULTS/experiments/autovacuum-hold"
log=$PGSYNC_PG_DIR/target.log
mkdir -p "$out"
jsonl=$out/runs.jsonl
tag=""
if [ "$TABLES" != 1 ]; then jsonl=$out/runs-$TABLES-tables.jsonl tag=-$TABLES-tables; fi
: >"$jsonl"

work=$(mktemp -d)
cleanup() { git -C "$root" worktree remove --force "$work/base" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
git -C "$root" worktree add -q --detach "$work/base" "$BASE"
(cd "$work/base" && go build -trimpath -ldflags "-X github.com/pgsync/pgsync/cmd.Version=$BASE" -o "$work/pgsync-base" ./cmd/pgsync)
(cd "$root" && make -s build)
head=$(git -C "$root" describe --always --dirty)
compare=false
[ "$COMPARE" = 1 ] && compare=true

cancels() { grep -c "canceling autovacuum task" "$log" 2>/dev/null || true; }
for round in $(seq "$ROUNDS"); do
  for variant in base head; do
    bin=$root/bin/pgsync
    [ "$variant" = base ] && bin=$work/pgsync-base
    runs="$work/runs-$variant"
    rm -rf "$runs" && mkdir -p "$runs"
    before=$(cancels)
    PGSYNC=$bin harness copy -streams 2 -tables "$TABLES" -compare=$compare -out "$runs" >"$runs/out.txt" 2>&1
    after=$(cancels)
    cp "$runs/copy-2-bootstrap.log" "$out/round$round-$variant$tag-bootstrap.log"
    commit=$head
    [ "$variant" = base ] && commit=$BASE
    first() { grep -o "\"$1\": [0-9.a-z]*" "$runs/copy.json" | head -1 | awk '{print $2}'; }
    # With several tables: the longest copy and key build (they run in parallel).
    longest() { grep -oE "$1" "$runs/copy-2-bootstrap.log" | sed 's/.* seconds=//' | sort -g | tail -1; }
    seconds=$(first seconds) tcpu=$(first target_cpu_seconds) hashes=$(first hashes_match)
    copy=$(longest 'msg="table copied".* seconds=[0-9.]+')
    pk=$(longest 'msg=created object="(primary key|constraint [^"]*_pkey)[^"]*" seconds=[0-9.]+')
    native=$(grep -A1 '"native_subscription": {' "$runs/copy.json" | grep -o '"seconds": [0-9.]*' | awk '{print $2}')
    for v in seconds tcpu hashes copy pk; do
      [ -n "${!v}" ] || { echo "autovacuum-hold-bench: no $v in $runs" >&2; exit 1; }
    done
    echo "{\"round\": $round, \"variant\": \"$variant\", \"commit\": \"$commit\", \"copy_seconds\": $copy, \"pk_seconds\": $pk, \"seconds\": $seconds, \"target_cpu_seconds\": $tcpu, \"hashes_match\": $hashes, \"autovacuum_cancelled\": $((after - before)), \"native_seconds\": ${native:-null}}" >>"$jsonl"
    tail -1 "$jsonl"
  done
done
