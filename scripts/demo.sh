#!/usr/bin/env bash
# The whole pgsync loop on two local clusters: bootstrap, writes on the
# source while `pgsync run` applies, then `pgsync verify`.
set -euo pipefail
cd "$(dirname "$0")/.."

export PGSYNC_PG_DIR=${PGSYNC_PG_DIR:-/tmp/pgsync-local-pg}
SRC_PORT=${PGSYNC_SOURCE_PORT:-55432}
TGT_PORT=${PGSYNC_TARGET_PORT:-55433}
DEMO_SECONDS=${DEMO_SECONDS:-10}
bash scripts/local-pg.sh start
run_pid=
# The clusters outlive the demo, so that its databases can be looked at:
# say so, where they are and how to stop them, however the demo ends.
on_exit() {
  [ -z "$run_pid" ] || kill "$run_pid" 2>/dev/null || true
  local vars
  vars=$(printf 'PGSYNC_PG_DIR=%q PGSYNC_SOURCE_PORT=%q PGSYNC_TARGET_PORT=%q' "$PGSYNC_PG_DIR" "$SRC_PORT" "$TGT_PORT")
  echo "== the demo's clusters are still running"
  echo "source: 127.0.0.1:$SRC_PORT, database demo, data in $PGSYNC_PG_DIR/source"
  echo "target: 127.0.0.1:$TGT_PORT, database demo, data in $PGSYNC_PG_DIR/target"
  echo "stop them:            $vars bash $(printf %q "$PWD/scripts/local-pg.sh") stop"
  echo "stop and delete them: $vars bash $(printf %q "$PWD/scripts/local-pg.sh") destroy"
}
trap on_exit EXIT
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1)
[ -n "$bindir" ] || bindir=$(pg_config --bindir)
psql() { "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -h 127.0.0.1 "$@"; }

echo "== fresh demo databases"
for port in "$SRC_PORT" "$TGT_PORT"; do
  psql -p "$port" -d postgres -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'pgsync_demo' AND NOT active" >/dev/null
  psql -p "$port" -d postgres -c "DROP DATABASE IF EXISTS demo WITH (FORCE)" -c "CREATE DATABASE demo"
done

echo "== sample dataset on the source"
psql -p "$SRC_PORT" -d demo <<'SQL'
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text, balance numeric(12,2) NOT NULL DEFAULT 0,
  tags text[], profile jsonb, signed_up timestamptz NOT NULL DEFAULT now());
CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int NOT NULL, amount numeric(10,2), note text,
  placed date NOT NULL DEFAULT current_date);
CREATE TABLE audit_log (at timestamptz, what text);
ALTER TABLE audit_log REPLICA IDENTITY FULL;
INSERT INTO customers SELECT g, 'customer ' || g, 'c' || g || '@example.com', g % 1000, ARRAY['t' || g % 5],
  jsonb_build_object('tier', g % 3), now() - g * interval '1 minute' FROM generate_series(1, 100000) g;
INSERT INTO orders (customer_id, amount, note) SELECT g % 100000 + 1, (g % 500) / 3.0, 'order ' || g FROM generate_series(1, 200000) g;
INSERT INTO audit_log SELECT now(), 'boot' FROM generate_series(1, 10);
SQL

cfg=$(mktemp /tmp/pgsync-demo-XXXX.toml)
cat >"$cfg" <<TOML
[source]
url = "postgres://postgres@127.0.0.1:$SRC_PORT/demo"
[target]
url = "postgres://postgres@127.0.0.1:$TGT_PORT/demo"
[job]
name = "demo"
tables = ["public.*"]
TOML

export PGSYNC_LOG_FORMAT=${PGSYNC_LOG_FORMAT:-text}
echo "== pgsync bootstrap"
bin/pgsync -c "$cfg" bootstrap

echo "== pgsync run, while pgbench writes on the source for ${DEMO_SECONDS}s"
bin/pgsync -c "$cfg" run 2>/tmp/pgsync-demo-run.log &
run_pid=$!
cat >/tmp/pgsync-demo-writes.sql <<'SQL'
\set id random(1, 100000)
BEGIN;
UPDATE customers SET balance = balance + 1, profile = profile || '{"seen": true}' WHERE id = :id;
INSERT INTO orders (customer_id, amount, note) VALUES (:id, random() * 100, 'demo');
DELETE FROM orders WHERE id = (SELECT min(id) FROM orders WHERE customer_id = :id);
INSERT INTO audit_log VALUES (now(), 'write');
END;
SQL
"$bindir/pgbench" -n -h 127.0.0.1 -p "$SRC_PORT" -U postgres -c 4 -T "$DEMO_SECONDS" -f /tmp/pgsync-demo-writes.sql demo 2>&1 | grep -E "transactions actually processed|^tps"

echo "== waiting for pgsync to catch up"
for _ in $(seq 1 120); do
  lag=$(bin/pgsync -c "$cfg" status --json | sed -n 's/.*"lag_bytes": \([0-9]*\).*/\1/p')
  [ "${lag:-1}" = 0 ] && break
  sleep 0.5
done
kill -TERM $run_pid
wait $run_pid || true
run_pid=
grep -E 'msg=(started|applying|stopped)' /tmp/pgsync-demo-run.log || true

echo "== pgsync status"
bin/pgsync -c "$cfg" status
echo "== pgsync verify"
bin/pgsync -c "$cfg" verify
