#!/usr/bin/env bash
# Runs every fuzz target for FUZZ_SECONDS (default 60) each and writes
# bench-results/fuzz.json with the executions and the outcome of each.
# Seeds live in each package's testdata/fuzz/; a failing input is written
# there by `go test` and makes this script exit 1.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
secs=${FUZZ_SECONDS:-60}
out=${RESULTS:-$root/bench-results}/fuzz.json
mkdir -p "$(dirname "$out")"
targets="pgoutput:FuzzDecode config:FuzzParse replication:FuzzDispatch"
rc=0
entries=""
for t in $targets; do
  pkg=${t%%:*} name=${t##*:}
  log=$(mktemp)
  echo "fuzz: $name in ./$pkg for ${secs}s"
  if timeout $((secs + 120)) go test -run '^$' -fuzz "^$name\$" -fuzztime "${secs}s" "./$pkg" >"$log" 2>&1; then
    result=pass
  else
    result=fail rc=1
    tail -20 "$log" >&2
  fi
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  entries="$entries${entries:+,}
    {\"package\": \"$pkg\", \"target\": \"$name\", \"seconds\": $secs, \"execs\": ${execs:-0}, \"result\": \"$result\"}"
  rm -f "$log"
done
cat >"$out" <<JSON
{
  "benchmark": "fuzz",
  "command": "FUZZ_SECONDS=$secs scripts/reliability/fuzz.sh",
  "date": "$(date -u +%FT%TZ)",
  "commit": "$(git rev-parse --short HEAD)",
  "targets": [$entries
  ]
}
JSON
cat "$out"
exit $rc
