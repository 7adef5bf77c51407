#!/usr/bin/env bash
# What a primary key costs during COPY: the same rows copied in binary into
# a table with its primary key, and into one without, whose key is added
# after (as bootstrap does for the tables it creates), interleaved, with
# the target's CPU. Needs the 1GB dataset of scripts/bench.sh (database
# bench on the source). Writes bench-results/pk-after-copy.json.
#   ROUNDS=2 bash scripts/pk-bench.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-lib.sh"
ROUNDS=${ROUNDS:-2}
bench_setup
rows=$(val_src bench "SELECT count(*) FROM bench_a")
psql_tgt postgres -c "DROP DATABASE IF EXISTS pk_bench WITH (FORCE)" -c "CREATE DATABASE pk_bench" >/dev/null
BENCH_ON_EXIT='psql_tgt postgres -c "DROP DATABASE IF EXISTS pk_bench WITH (FORCE)" >/dev/null 2>&1'
cols="(id bigint NOT NULL, customer text NOT NULL, qty int NOT NULL, price numeric(12,2), created timestamptz NOT NULL, note text)"
load() { # load TABLE: binary COPY of bench_a into TABLE
  psql_src bench -c "COPY bench_a TO STDOUT (FORMAT binary)" | psql_tgt pk_bench -c "COPY $1 FROM STDIN (FORMAT binary)"
}
now() { date +%s.%N; }
results=""
for i in $(seq "$ROUNDS"); do
  psql_tgt pk_bench -c "DROP TABLE IF EXISTS with_pk, without_pk" -c "CREATE TABLE with_pk $cols" -c "ALTER TABLE with_pk ADD PRIMARY KEY (id)" \
    -c "CREATE TABLE without_pk $cols" -c "CHECKPOINT" >/dev/null
  g0=$(children_cpu "$TGT_PORT"); t0=$(now)
  load with_pk
  t1=$(now); with_cpu=$(cpu_delta "$TGT_PORT" "$g0")
  psql_tgt pk_bench -c "CHECKPOINT" >/dev/null
  g0=$(children_cpu "$TGT_PORT"); t2=$(now)
  load without_pk
  t3=$(now)
  psql_tgt pk_bench -c "ALTER TABLE without_pk ADD PRIMARY KEY (id)"
  t4=$(now); without_cpu=$(cpu_delta "$TGT_PORT" "$g0")
  results="$results${results:+,}
    {\"round\": $i, \"with_pk_seconds\": $(elapsed "$t0" "$t1"), \"with_pk_target_cpu_seconds\": $with_cpu,
     \"without_pk_copy_seconds\": $(elapsed "$t2" "$t3"), \"add_pk_seconds\": $(elapsed "$t3" "$t4"),
     \"without_pk_total_seconds\": $(elapsed "$t2" "$t4"), \"without_pk_target_cpu_seconds\": $without_cpu}"
done
cat >"$RESULTS/pk-after-copy.json" <<JSON
{
  "benchmark": "pk-after-copy",
  "command": "ROUNDS=$ROUNDS scripts/pk-bench.sh",
  "date": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
$(env_json),
  "rows": $rows,
  "rounds": [$results
  ]
}
JSON
cat "$RESULTS/pk-after-copy.json"
