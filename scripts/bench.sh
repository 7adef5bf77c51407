#!/usr/bin/env bash
# Initial copy and continuous replication (see docs/benchmarks.md): the
# harness's cdc scenario (scripts/bench/harness/cdc.go) under the script's
# old interface.
#   DATASET=100MB|1GB (2 x 400k or 2 x 4M rows)
#   CDC_SECONDS=60    (4 pgbench writers)
#   RTT_MS=N          (the consumers reach the source through
#                     scripts/latency-proxy with an N ms round trip)
#   RESULTS=DIR       (default bench-results)
# Writes RESULTS/bench-<dataset>.json and its side files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# PGSYNC (another build to measure) is taken from the caller's directory.
[ -z "${PGSYNC:-}" ] || export PGSYNC=$(realpath "$PGSYNC")
DATASET=${DATASET:-100MB}
CDC_SECONDS=${CDC_SECONDS:-60}
RTT_MS=${RTT_MS:-}
RESULTS=$(mkdir -p "${RESULTS:-$root/bench-results}" && cd "${RESULTS:-$root/bench-results}" && pwd)
cd "$(dirname "$0")/bench" && exec go run ./harness -root ../.. cdc -dataset "$DATASET" -cdc-seconds "$CDC_SECONDS" ${RTT_MS:+-rtt "$RTT_MS"} -out "$RESULTS"
