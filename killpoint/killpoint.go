// Package killpoint lets the kill models end a pgsync command with SIGKILL
// right after a chosen statement, so that every statement of a command can
// be the last one it ran: an external kill at a random time hits the slow
// statements and misses the fast ones between them. It does nothing unless
// PGSYNC_KILL_AFTER_STATEMENT, PGSYNC_KILL_AFTER_TEXT or
// PGSYNC_STATEMENT_LOG is set in the environment of the process; no configuration key reaches it.
package killpoint

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/jackc/pgx/v5"
)

var (
	// killAfter is the number of the statement after which the process
	// kills itself (from 1); 0: never.
	killAfter, _ = strconv.ParseInt(os.Getenv("PGSYNC_KILL_AFTER_STATEMENT"), 10, 64)
	// killAfterText, when set, makes the process kill itself after the
	// first statement whose text is exactly it: a kill point named by the
	// statement, for a model that aims at one window.
	killAfterText = os.Getenv("PGSYNC_KILL_AFTER_TEXT")
	// logPath, when set, gets one line per counted statement: its number
	// and the start of its text, for the model to name its kill points.
	logPath = os.Getenv("PGSYNC_STATEMENT_LOG")
	count   atomic.Int64
	logMu   sync.Mutex
)

// Enabled reports whether statements are counted in this process.
func Enabled() bool { return killAfter > 0 || killAfterText != "" || logPath != "" }

type uncountedKey struct{}

// Uncounted marks ctx so that statements run under it are not counted:
// polls repeated a number of times that depends on timing, which would
// make a statement's number differ from one run to the next.
func Uncounted(ctx context.Context) context.Context {
	if !Enabled() {
		return ctx
	}
	return context.WithValue(ctx, uncountedKey{}, true)
}

// Done counts a statement that has completed; when it is the chosen one,
// the process ends at once with SIGKILL, as a kill -9 would end it.
func Done(ctx context.Context, sql string) {
	if !Enabled() || ctx.Value(uncountedKey{}) != nil {
		return
	}
	// Numbered and written under one lock: statements of concurrent
	// sessions (a compare hashes both sides at once) are then in the log
	// in the order of their numbers.
	logMu.Lock()
	n := count.Add(1)
	if logPath != "" {
		if f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintf(f, "%d\t%s\n", n, firstLine(sql))
			f.Close()
		}
	}
	logMu.Unlock()
	if n == killAfter || killAfterText != "" && strings.TrimSpace(sql) == killAfterText {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal ends the process before anything else runs
	}
}

func firstLine(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexByte(sql, '\n'); i >= 0 {
		sql = sql[:i]
	}
	if len(sql) > 100 {
		sql = sql[:100]
	}
	return sql
}

// Tracer counts the statements of a pgx connection (pgx.ConnConfig.Tracer).
type Tracer struct{}

type sqlKey struct{}

// TraceQueryStart keeps the statement's text for TraceQueryEnd.
func (Tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, sqlKey{}, data.SQL)
}

// TraceQueryEnd counts the statement once the server has answered it.
func (Tracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	if data.Err != nil {
		return // a failed statement changed nothing to resume from
	}
	sql, _ := ctx.Value(sqlKey{}).(string)
	Done(ctx, sql)
}

// TraceBatchStart keeps nothing: each statement of a batch is counted as
// its result is read (TraceBatchQuery), with its own text.
func (Tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

// TraceBatchQuery counts one statement of a batch once its result is read.
// pgx calls it instead of TraceQueryEnd for the batch's statements.
func (Tracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	if data.Err != nil {
		return
	}
	Done(ctx, data.SQL)
}

// TraceBatchEnd counts nothing: the batch's statements were counted one
// by one.
func (Tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
