# Sourced by scripts/local-pg.sh and scripts/pg-versions.sh: the settings
# of every test cluster, written once so that a cluster of another major
# runs as the 15 ones do (issue 32).

# pg_cluster_conf PORT SOCKETDIR ROLE MAJOR prints the postgresql.conf
# lines of a cluster. ROLE is source or target; MAJOR leaves out what an
# older server does not know (it refuses to start on an unknown setting).
pg_cluster_conf() {
  local port=$1 sockdir=$2 role=$3 major=${4:-15}
  echo "listen_addresses = '127.0.0.1'"
  echo "port = $port"
  echo "unix_socket_directories = '$sockdir'"
  echo "shared_buffers = 256MB"
  echo "fsync = on"
  echo "max_connections = 200"
  echo "max_wal_senders = 40"
  echo "max_replication_slots = 40"
  echo "max_worker_processes = 40"
  echo "max_logical_replication_workers = 30"
  echo "max_sync_workers_per_subscription = 2"
  echo "wal_sender_timeout = 30s"
  echo "log_min_messages = warning"
  # The database and application_name of each line: a test finds the
  # errors of its own databases among those of tests run beside it.
  echo "log_line_prefix = '%m [%p] %qdb=%d app=%a: '"
  # The target takes part in native-replication benchmarks as subscriber,
  # so both sides decode.
  echo "wal_level = logical"
  if [ "$role" = source ] && [ "$major" -ge 13 ]; then
    echo "max_slot_wal_keep_size = 4GB" # PostgreSQL 13 added it
  fi
}
