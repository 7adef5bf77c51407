#!/usr/bin/env bash
# Catch-up with the source far away (issue 18): scripts/catchup-bench.sh
# RUNS times at each round trip of RTTS, the source behind
# scripts/latency-proxy for pgsync, native's subscriber and the floor's
# reader alike; each run applies the same backlog with pgsync and then
# with native, back to back. The runs are interleaved (run 1 at every
# round trip, then run 2...), so a drift of the machine spreads over all
# of them. "direct" in RTTS is a run without the proxy.
#   RTTS="0 2 10" RUNS=3 bash scripts/rtt-bench.sh
# BACKLOG_TXNS and ROWS pass through to catchup-bench.sh. Each run's files
# are in bench-results/rtt/<rtt>ms-<run>/; the summary, with every run's
# seconds for native and pgsync and their ratio, in bench-results/rtt.json.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
R=$RESULTS
RTTS=${RTTS:-0 2 10}
RUNS=${RUNS:-3}
for rtt in $RTTS; do
  case $rtt in
    direct) ;;
    '' | *[!0-9]*) echo "rtt-bench: RTTS holds whole milliseconds or 'direct', not '$rtt'" >&2; exit 2 ;;
  esac
done

dir() { echo "$R/rtt/${1}$([ "$1" = direct ] || echo ms)-$2"; }

for run in $(seq 1 "$RUNS"); do
  for rtt in $RTTS; do
    echo "rtt-bench: $(date -u +%H:%M:%S) run $run of $RUNS, round trip $rtt"
    ms=$rtt
    [ "$rtt" != direct ] || ms=""
    RTT_MS=$ms RESULTS=$(dir "$rtt" "$run") bash "$root/scripts/catchup-bench.sh" >/dev/null
  done
done

# field FILE SECTION KEY: KEY's value inside the top-level object SECTION
# of a catchup.json (SECTION empty: a top-level KEY).
field() {
  if [ -z "$2" ]; then
    sed -n "s/^  \"$3\": \([^,]*\),\{0,1\}$/\1/p" "$1"
  else
    sed -n "/^  \"$2\": {/,/^  }/ s/^    \"$3\": \([^,]*\),\{0,1\}$/\1/p" "$1"
  fi
}
# list SECTION KEY RTT: the values of every run at RTT, comma-separated.
list() {
  local run out=""
  for run in $(seq 1 "$RUNS"); do
    out+="${out:+, }$(field "$(dir "$3" "$run")/catchup.json" "$1" "$2")"
  done
  echo "$out"
}
# spread "A, B, C": max - min.
spread() { tr ',' '\n' <<<"$1" | awk 'NR == 1 || $1 < lo { lo = $1 } NR == 1 || $1 > hi { hi = $1 } END { printf "%.2f", hi - lo }'; }
# all_true "true, false": true when every value is.
all_true() { case $1 in *false*) echo false ;; *) echo true ;; esac; }

first=$(dir "${RTTS%% *}" 1)/catchup.json
objects=()
for rtt in $RTTS; do
  ms=$rtt
  [ "$rtt" != direct ] || ms=null
  native=$(list native seconds "$rtt") pgsync=$(list pgsync seconds "$rtt")
  objects+=("$(cat <<JSON
    {
      "rtt_ms": $ms,
      "native_seconds": [$native],
      "pgsync_seconds": [$pgsync],
      "pgsync_vs_native": [$(list "" pgsync_vs_native "$rtt")],
      "floor_seconds": [$(list floor seconds "$rtt")],
      "native_spread_seconds": $(spread "$native"),
      "pgsync_spread_seconds": $(spread "$pgsync"),
      "hashes_match": $(all_true "$(list pgsync hashes_match "$rtt"), $(list native hashes_match "$rtt")")
    }
JSON
)")
done
cat >"$R/rtt.json" <<JSON
{
  "benchmark": "rtt",
  "command": "scripts/rtt-bench.sh (RTTS=\"$RTTS\" RUNS=$RUNS BACKLOG_TXNS=${BACKLOG_TXNS:-5000} ROWS=${ROWS:-200000})",
  "date": "$(date -u +%FT%TZ)",
$(sed -n '/^  "environment": {/,/^  }/p' "$first" | sed '$ s/,$//'),
  "backlog_transactions": $(field "$first" "" backlog_transactions),
  "round_trips": [
$(printf '%s\n' "${objects[@]}" | sed '$!s/^    }$/    },/')
  ]
}
JSON
cat "$R/rtt.json"
