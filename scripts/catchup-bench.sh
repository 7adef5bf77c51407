#!/usr/bin/env bash
# Catch-up throughput: harness catchup (scripts/bench/harness/catchup.go).
# With the job bootstrapped and stopped, a backlog of BACKLOG_TXNS
# transactions is applied by `pgsync run --until-caught-up`, then by a
# native subscription disabled while it was written; the floor
# (scripts/discard, and the server's decoding alone) is read on it too.
# RTT_MS=N puts scripts/latency-proxy with an N ms round trip in front of
# the source for every consumer; PGSYNC_RUN_FLAGS are extra flags for
# pgsync run. Writes RESULTS (default bench-results)/catchup.json and its
# steps' files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# PGSYNC (another build to measure) is taken from the caller's directory.
[ -z "${PGSYNC:-}" ] || export PGSYNC=$(realpath "$PGSYNC")
RESULTS=${RESULTS:-$root/bench-results}
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
cd "$root/scripts/bench" && exec go run ./harness -root ../.. catchup \
  -backlog "${BACKLOG_TXNS:-5000}" -rows "${ROWS:-200000}" -rtt "${RTT_MS:--1}" \
  -run-flags "${PGSYNC_RUN_FLAGS:-}" -out "$RESULTS"
