#!/usr/bin/env bash
# What holding autovacuum off the target tables during the copy saves: the
# one-table copy of scripts/copy-bench.sh (8M rows, 2 streams, pgsync only)
# at BASE, which has no hold, and at this tree, interleaved. For each run:
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
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=${BASE:-00286dc}
ROUNDS=${ROUNDS:-3}
TABLES=${TABLES:-1}
COMPARE=${COMPARE:-0}
RESULTS=${RESULTS:-$root/bench-results}
out="$RESULTS/experiments/autovacuum-hold"
log=${PGSYNC_PG_DIR:-/tmp/pgsync-bench-pg}/target.log
mkdir -p "$out"
jsonl=$out/runs.jsonl
tag=""
if [ "$TABLES" != 1 ]; then jsonl=$out/runs-$TABLES-tables.jsonl tag=-$TABLES-tables; fi
: >"$jsonl"

work=$(mktemp -d)
cleanup() { git -C "$root" worktree remove --force "$work/base" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
git -C "$root" worktree add -q --detach "$work/base" "$BASE"
head=$(git -C "$root" describe --always --dirty)

cancels() { grep -c "canceling autovacuum task" "$log" 2>/dev/null || true; }
for round in $(seq "$ROUNDS"); do
  for variant in base head; do
    tree=$root
    [ "$variant" = base ] && tree=$work/base
    runs="$work/runs-$variant"
    rm -rf "$runs" && mkdir -p "$runs"
    before=$(cancels)
    (cd "$tree" && RESULTS="$runs" STREAMS=2 TABLES="$TABLES" COMPARE="$COMPARE" bash scripts/copy-bench.sh >"$runs/out.txt" 2>&1)
    after=$(cancels)
    cp "$runs/copy-2-bootstrap.log" "$out/round$round-$variant$tag-bootstrap.log"
    python3 - "$runs" "$variant" "$round" "$BASE" "$((after - before))" "$head" >>"$jsonl" <<'EOF'
import json, re, sys
runs, variant, rnd, base, cancelled, head = sys.argv[1:]
d = json.load(open(f'{runs}/copy.json'))['pgsync'][0]
text = open(f'{runs}/copy-2-bootstrap.log').read()
# With several tables: the longest copy and key build (they run in parallel).
copy = max(float(x) for x in re.findall(r'msg="table copied".* seconds=([0-9.]+)', text))
pk = max(float(x) for x in re.findall(r'msg=created object="primary key[^"]*" seconds=([0-9.]+)', text))
whole = json.load(open(f'{runs}/copy.json'))
native = whole.get('native_subscription', {}).get('seconds')
print(json.dumps({'round': int(rnd), 'variant': variant, 'commit': base if variant == 'base' else head,
                  'copy_seconds': copy, 'pk_seconds': pk, 'seconds': d['seconds'],
                  'target_cpu_seconds': d['target_cpu_seconds'], 'hashes_match': d['hashes_match'],
                  'autovacuum_cancelled': int(cancelled), 'native_seconds': native}))
EOF
    tail -1 "$jsonl"
  done
done
