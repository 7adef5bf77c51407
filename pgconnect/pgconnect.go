// Package pgconnect opens pgsync's PostgreSQL connections with the session
// settings that every side must share, so that text values round-trip
// unchanged and hashes agree between source and target.
package pgconnect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pgsync/pgsync/killpoint"
)

// replicationReadBuffer is the replication connection's read buffer.
const replicationReadBuffer = 256 << 10

// DefaultConnectTimeout bounds a connection attempt when the url sets none,
// so that an unreachable server fails fast.
const DefaultConnectTimeout = 5 * time.Second

// sessionParams fix every setting that changes the text form of a value.
var sessionParams = map[string]string{
	"application_name":   "pgsync",
	"TimeZone":           "UTC",
	"DateStyle":          "ISO, MDY",
	"IntervalStyle":      "postgres",
	"extra_float_digits": "3",
	"bytea_output":       "hex",
	"lc_monetary":        "C",
	"client_encoding":    "UTF8",
}

// ParseConfig parses url and applies pgsync's session settings.
func ParseConfig(url string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	apply(&cfg.Config)
	if killpoint.Enabled() {
		cfg.Tracer = killpoint.Tracer{}
	}
	return cfg, nil
}

func apply(cfg *pgconn.Config) {
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	for k, v := range sessionParams {
		if _, set := cfg.RuntimeParams[k]; set && k == "application_name" {
			continue // the operator's name for the connection wins
		}
		cfg.RuntimeParams[k] = v
	}
}

// WithSetting returns url with the server setting key = value added, sent
// when the session starts: a RESET ALL in the session goes back to it.
// url is a URL (postgres://...) or key=value pairs, as pgx reads both.
func WithSetting(url, key, value string) string {
	if strings.Contains(url, "://") {
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		return url + sep + neturl.QueryEscape(key) + "=" + neturl.QueryEscape(value)
	}
	return url + " " + key + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(value) + "'"
}

// Connect opens a normal connection. role names the server ("source" or
// "target") in the error. A source connection sends each query in one
// round trip (QueryExecModeExec) instead of pgx's default two, a prepare
// and then the execution: the source is the server that may be far away,
// and what pgsync asks it is one-off catalog queries, which a cached
// statement would not save parsing for.
func Connect(ctx context.Context, role, url string) (*pgx.Conn, error) {
	return ConnectAs(ctx, role, url, "")
}

// ConnectAs is Connect with application_name set to name (unless the url
// sets one): pgsync's sessions beside the one that applies, those that
// read the servers for the metrics and the online verify's holds, are told
// apart from it in pg_stat_activity. An empty name keeps "pgsync".
func ConnectAs(ctx context.Context, role, url, name string) (*pgx.Conn, error) {
	cfg, err := ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%s url: %w", role, err)
	}
	if name != "" && cfg.RuntimeParams["application_name"] == sessionParams["application_name"] {
		cfg.RuntimeParams["application_name"] = name
	}
	if role == "source" {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s %s: %w", role, hostList(&cfg.Config), err)
	}
	return conn, nil
}

// ErrReplicaRole is returned by ConnectTarget when the target user may not
// set session_replication_role.
var ErrReplicaRole = errors.New("cannot set session_replication_role")

// ConnectTarget opens a target connection that writes replicated rows. As
// under PostgreSQL's own apply worker, it runs with session_replication_role
// = replica, so that ordinary triggers and foreign-key checks of the target
// do not fire on replicated rows (triggers enabled with ENABLE REPLICA or
// ENABLE ALWAYS do), and with synchronous_commit = on, so that a commit
// pgsync acknowledges to the source survives a crash of the target whatever
// the database's or role's setting.
func ConnectTarget(ctx context.Context, url string) (*pgx.Conn, error) {
	conn, err := Connect(ctx, "target", url)
	if err != nil {
		return nil, err
	}
	if err := ReplicaSession(ctx, conn); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}

// ReplicaSession sets the session of a target connection as ConnectTarget
// does; bootstrap calls it first, so that a user who may not set
// session_replication_role is told before anything is created.
func ReplicaSession(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, "SET session_replication_role = replica")
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		user := conn.Config().User
		return fmt.Errorf("target user %s %w (needed to apply as a replica, as PostgreSQL's own subscriptions do): connect as a superuser or, on PostgreSQL 15 and later, GRANT SET ON PARAMETER session_replication_role TO %s",
			user, ErrReplicaRole, user)
	}
	if err == nil {
		_, err = conn.Exec(ctx, "SET synchronous_commit = on")
	}
	if err != nil {
		return fmt.Errorf("set up the target session: %w", err)
	}
	return nil
}

// ConnectReplication opens a logical replication connection
// (replication=database) to the source.
func ConnectReplication(ctx context.Context, url string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("source url: %w", err)
	}
	apply(cfg)
	cfg.RuntimeParams["replication"] = "database"
	// The walsender sends many small messages: read them in large chunks,
	// not pgx's 8 KiB, for fewer read system calls (docs/benchmarks.md, less
	// CPU per row).
	cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
		return pgproto3.NewFrontend(bufio.NewReaderSize(r, replicationReadBuffer), w)
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open replication connection to source %s: %w", hostList(cfg), err)
	}
	return conn, nil
}

// Hosts is the host:port list of the servers url names ("a:5432,b:5432"),
// for errors and logs. A url may name several, as libpq's do (host=a,b or
// postgres://u@a:5432,b:5432/db?target_session_attrs=read-write), and pgx
// tries each in turn until one is as target_session_attrs asks: an error
// naming only the first would send the operator to the wrong server after
// a failover. It carries no user or password. An unparsable url gives "".
func Hosts(url string) string {
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return ""
	}
	return hostList(cfg)
}

// hostList is cfg's hosts, each once: pgx lists a host twice, with and
// without TLS, under sslmode=prefer.
func hostList(cfg *pgconn.Config) string {
	seen := map[string]bool{}
	var out []string
	add := func(host string, port uint16) {
		hp := net.JoinHostPort(host, strconv.Itoa(int(port)))
		if strings.HasPrefix(host, "/") { // a unix socket directory
			hp = host + ":" + strconv.Itoa(int(port))
		}
		if !seen[hp] {
			seen[hp] = true
			out = append(out, hp)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return strings.Join(out, ",")
}
