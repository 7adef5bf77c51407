//go:build versions

package versions

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// writerRole is the application's role in the standby tests, which
// cutover locks.
const writerRole = "app_writer"

// failoverSchema is the moved database: acks holds one row per writer
// transaction, counter counts the transactions (a transaction applied
// twice counts twice), both on source and target.
const failoverSchema = `
CREATE TABLE acks (id bigint PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), note text);
CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL);
`

// startPrimaryAndStandby starts a primary of major with database app
// (failoverSchema, 10,000 rows, the counter at 10,000) and a hot standby
// made from a copy of its stopped data directory (the npm package has no
// pg_basebackup), streaming through physical slot standby1 with
// hot_standby_feedback, synchronously when synchronous is set (the
// primary's commits wait for it); from 17 on the standby also
// synchronizes slots and the primary's synchronized_standby_slots names
// standby1. Both are stopped by the test's cleanup and by TestMain.
func startPrimaryAndStandby(t *testing.T, major, primaryPort, standbyPort int, synchronous bool) (primary, standby cluster) {
	t.Helper()
	primary = cluster{major: major, port: primaryPort, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/app?sslmode=disable", primaryPort)}
	standby = cluster{major: major, port: standbyPort, url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/app?sslmode=disable", standbyPort)}
	primary.dir = startCluster(t, primary.major, primary.port)
	admin := connect(t, primary.adminURL())
	exec1(t, admin, "create database", "CREATE DATABASE app")
	exec1(t, connect(t, primary.url), "the schema on the primary", failoverSchema+`
INSERT INTO acks (id, note) SELECT -g, 'before the move' FROM generate_series(1, 10000) g;
INSERT INTO counter VALUES (1, 10000);
CREATE ROLE `+writerRole+` LOGIN;
GRANT SELECT, INSERT, UPDATE ON acks, counter TO `+writerRole)
	exec1(t, admin, "the standby's slot", "SELECT pg_create_physical_replication_slot('standby1')")
	if out, err := pgVersions(2*time.Minute, "stop", primary.dir); err != nil {
		t.Fatalf("stop the primary to copy it: %v\n%s", err, out)
	}

	standby.dir = registerDir(t, fmt.Sprintf("pg%d-standby-", major))
	if out, err := asPostgres(time.Minute, "cp", "-a", filepath.Join(primary.dir, "data"), filepath.Join(standby.dir, "data")); err != nil {
		t.Fatalf("copy the primary's data directory: %v\n%s", err, out)
	}
	data := filepath.Join(standby.dir, "data")
	writePostgresFile(t, filepath.Join(data, "standby.signal"), "", false)
	// Later lines win: the copy's port and socket directory are the
	// primary's. A server refuses to start on a setting it does not know.
	conf := fmt.Sprintf(`
port = %d
unix_socket_directories = '%s'
primary_conninfo = 'host=127.0.0.1 port=%d user=postgres dbname=postgres application_name=standby1'
primary_slot_name = 'standby1'
hot_standby_feedback = on
`, standbyPort, standby.dir, primaryPort)
	if major >= 17 {
		conf += "sync_replication_slots = on\n"
	}
	writePostgresFile(t, filepath.Join(data, "postgresql.conf"), conf, true)
	for _, c := range []cluster{primary, standby} {
		if out, err := pgVersions(2*time.Minute, "start", strconv.Itoa(c.major), c.dir, strconv.Itoa(c.port)); err != nil {
			t.Fatalf("start PostgreSQL %d in %s: %v\n%s", c.major, c.dir, err, out)
		}
	}
	// Set after the copy, so that the promoted standby has neither.
	admin = connect(t, primary.adminURL())
	if major >= 17 {
		exec1(t, admin, "synchronized_standby_slots", "ALTER SYSTEM SET synchronized_standby_slots = 'standby1'")
	}
	syncState := "async"
	if synchronous {
		syncState = "sync"
		exec1(t, admin, "synchronous_standby_names", "ALTER SYSTEM SET synchronous_standby_names = 'standby1'")
	}
	exec1(t, admin, "reload", "SELECT pg_reload_conf()")
	eventually(t, 60*time.Second, "standby1 to stream ("+syncState+")", func() bool {
		return queryOne[bool](t, admin, "SELECT EXISTS (SELECT 1 FROM pg_stat_replication WHERE application_name = 'standby1' AND state = 'streaming' AND sync_state = $1)", syncState)
	})
	return primary, standby
}

// registerDir makes a cluster directory under workDir that the test's
// cleanup and TestMain stop the server of.
func registerDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(workDir, prefix)
	if err != nil {
		t.Fatal(err)
	}
	startedMu.Lock()
	started = append(started, dir)
	startedMu.Unlock()
	t.Cleanup(func() {
		if out, err := pgVersions(2*time.Minute, "stop", dir); err != nil {
			t.Errorf("stop the cluster in %s: %v\n%s", dir, err, out)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chownPostgres(t, dir)
	return dir
}

// asPostgres runs a command as the postgres user when the test runs as
// root (the servers' files are postgres's), bounded by timeout.
func asPostgres(timeout time.Duration, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if os.Geteuid() == 0 {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return cmd.CombinedOutput()
}

// writePostgresFile writes (or appends) body to path, owned by postgres
// when the test runs as root.
func writePostgresFile(t *testing.T, path, body string, appendTo bool) {
	t.Helper()
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendTo {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	chownPostgres(t, path)
}

func chownPostgres(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}
