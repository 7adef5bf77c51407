package killpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestBatchStatementsAreLoggedWithTheirText(t *testing.T) {
	log := filepath.Join(t.TempDir(), "statements")
	logPath = log
	t.Cleanup(func() { logPath = "" })
	var tr Tracer
	ctx := tr.TraceBatchStart(context.Background(), nil, pgx.TraceBatchStartData{})
	tr.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{SQL: "SELECT hash FROM t1"})
	tr.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{SQL: "SELECT hash FROM t2", Err: errors.New("failed")})
	tr.TraceBatchQuery(ctx, nil, pgx.TraceBatchQueryData{SQL: "SELECT hash FROM t3"})
	tr.TraceBatchEnd(ctx, nil, pgx.TraceBatchEndData{})
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "\tSELECT hash FROM t1") || !strings.HasSuffix(lines[1], "\tSELECT hash FROM t3") {
		t.Fatalf("statement log %q: want the two statements that succeeded, each with its text", lines)
	}
}
