#!/usr/bin/env bash
# A whole database into an empty target, three ways, side by side in one
# run, on the one-table (8M rows) and the two-table (two 4M-row tables,
# about 1 GB) datasets, each table with its primary key and two secondary
# indexes:
#   (a) pg_dump --schema-only restored first, then pgsync bootstrap
#       (every row goes into tables that already have their indexes);
#   (b) pgsync bootstrap into the empty database: pg_dump's pre-data
#       section before the copy, its post-data section after it;
#   (c) pgcopydb clone --table-jobs 2 --index-jobs 2
#       --split-tables-larger-than 64MB (Debian's pgcopydb, installed when
#       missing).
# DATASETS="1 2" picks the datasets; ROWS (8000000) is the total rows of
# each. Writes bench-results/schema.json and schema-*.log.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"
ROWS=${ROWS:-8000000}
DATASETS=${DATASETS:-"1 2"}
bench_setup
if ! command -v pgcopydb >/dev/null; then
  apt-get install -y pgcopydb >/dev/null
fi
PGCOPYDB_VERSION=$(pgcopydb --version 2>&1 | grep -o 'pgcopydb version [^ ]*' | head -1 | awk '{print $3}')
work=$(mktemp -d)
reset_wal() { for p in "$SRC_PORT" "$TGT_PORT"; do "$bindir/psql" -X -q -U postgres -h 127.0.0.1 -p "$p" -d postgres -c "ALTER SYSTEM RESET max_wal_size" -c "SELECT pg_reload_conf()" >/dev/null || true; done; }
BENCH_ON_EXIT='reset_wal; rm -rf "$work"'
for p in "$SRC_PORT" "$TGT_PORT"; do
  "$bindir/psql" -X -q -U postgres -h 127.0.0.1 -p "$p" -d postgres -c "ALTER SYSTEM SET max_wal_size = '8GB'" -c "SELECT pg_reload_conf()" >/dev/null
done
settle() { psql_src schemasrc -c "CHECKPOINT" >/dev/null; psql_tgt postgres -c "CHECKPOINT" >/dev/null; }
target_db() { psql_tgt postgres -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1" >/dev/null; }

results=""
for ds in $DATASETS; do
  case "$ds" in
    1) names="bench_a" ;;
    2) names="bench_a bench_b" ;;
    *) echo "schema-bench: datasets are 1 and 2" >&2; exit 2 ;;
  esac
  echo "schema-bench: $ROWS rows in $ds table(s)"
  fresh_db schemasrc
  per_table=$((ROWS / ds))
  for t in $names; do
    psql_src schemasrc -c "CREATE TABLE $t (id bigint PRIMARY KEY, customer text NOT NULL, qty int NOT NULL, price numeric(12,2),
      created timestamptz NOT NULL, note text)" \
      -c "INSERT INTO $t SELECT g, 'customer-' || (g % 100000), g % 1000, (g % 100000) / 7.0,
      '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 second', repeat(md5(g::text), 2) FROM generate_series(1, $per_table) g" \
      -c "CREATE INDEX ${t}_customer ON $t (customer)" -c "CREATE INDEX ${t}_created ON $t (created)" -c "VACUUM ANALYZE $t" >/dev/null
  done
  src_url="postgres://postgres@127.0.0.1:$SRC_PORT/schemasrc"

  # (a) the schema first, then bootstrap.
  target_db schema_a
  write_config "$work/a.toml" schemaa schemasrc schema_a
  settle
  t0=$(now)
  "$bindir/pg_dump" --schema-only -d "$src_url" | "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -h 127.0.0.1 -p "$TGT_PORT" -d schema_a >/dev/null
  "$PGSYNC" -c "$work/a.toml" bootstrap >/dev/null 2>"$RESULTS/schema-$ds-a.log"
  a_secs=$(elapsed "$t0" "$(now)")
  "$PGSYNC" -c "$work/a.toml" verify >/dev/null && a_match=true || a_match=false
  "$PGSYNC" -c "$work/a.toml" teardown >/dev/null
  psql_tgt postgres -c "DROP DATABASE schema_a WITH (FORCE)" >/dev/null
  echo "  (a) pg_dump -s restored, then bootstrap: ${a_secs}s"

  # (b) bootstrap with pg_dump's sections.
  target_db schema_b
  write_config "$work/b.toml" schemab schemasrc schema_b
  settle
  t0=$(now)
  "$PGSYNC" -c "$work/b.toml" bootstrap >/dev/null 2>"$RESULTS/schema-$ds-b.log"
  b_secs=$(elapsed "$t0" "$(now)")
  grep -q 'schema restored from pg_dump' "$RESULTS/schema-$ds-b.log" || { echo "schema-bench: (b) did not take pg_dump's schema" >&2; exit 1; }
  "$PGSYNC" -c "$work/b.toml" verify >/dev/null && b_match=true || b_match=false
  "$PGSYNC" -c "$work/b.toml" teardown >/dev/null
  psql_tgt postgres -c "DROP DATABASE schema_b WITH (FORCE)" >/dev/null
  echo "  (b) bootstrap with pg_dump's sections: ${b_secs}s"

  # (c) pgcopydb clone.
  target_db schema_c
  rm -rf "$work/pgcopydb"
  settle
  t0=$(now)
  pgcopydb clone --source "$src_url" --target "postgres://postgres@127.0.0.1:$TGT_PORT/schema_c" \
    --table-jobs 2 --index-jobs 2 --split-tables-larger-than 64MB --dir "$work/pgcopydb" >"$RESULTS/schema-$ds-c.log" 2>&1
  c_secs=$(elapsed "$t0" "$(now)")
  c_rows=$(val_tgt schema_c "SELECT sum(n) FROM (SELECT count(*) AS n FROM bench_a $( [ "$ds" = 2 ] && echo 'UNION ALL SELECT count(*) FROM bench_b')) x")
  psql_tgt postgres -c "DROP DATABASE schema_c WITH (FORCE)" >/dev/null
  need c_rows
  echo "  (c) pgcopydb clone: ${c_secs}s ($c_rows rows)"

  results="$results${results:+,}
    {\"tables\": $ds, \"rows\": $ROWS, \"schema_then_bootstrap_s\": $a_secs, \"schema_then_bootstrap_identical\": $a_match,
     \"bootstrap_pg_dump_sections_s\": $b_secs, \"bootstrap_pg_dump_sections_identical\": $b_match,
     \"pgcopydb_clone_s\": $c_secs, \"pgcopydb_rows\": ${c_rows},
     \"b_over_a\": $(ratio "$b_secs" "$a_secs"), \"b_over_c\": $(ratio "$b_secs" "$c_secs")}"
done
cat >"$RESULTS/schema.json" <<JSON
{
  "benchmark": "schema",
  "command": "ROWS=$ROWS DATASETS=\"$DATASETS\" scripts/schema-bench.sh",
  "date": "$(date -u +%FT%TZ)",
  "pgcopydb": "$PGCOPYDB_VERSION",
$(env_json),
  "datasets": [$results
  ]
}
JSON
cat "$RESULTS/schema.json"
