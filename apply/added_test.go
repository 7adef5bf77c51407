package apply

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/pgsync/pgsync/replication"
)

// TestTableBeingAddedIsPause checks that replication.Stream sees a table being
// added as an intended end of the session, wrapped or not, and nothing else.
func TestTableBeingAddedIsPause(t *testing.T) {
	err := &TableBeingAddedError{Job: "j", Table: "public.t", LSN: 1}
	if !errors.Is(err, replication.ErrPaused) {
		t.Error("TableBeingAddedError is not replication.ErrPaused")
	}
	if !errors.Is(fmt.Errorf("session: %w", err), replication.ErrPaused) {
		t.Error("a wrapped TableBeingAddedError is not replication.ErrPaused")
	}
	if errors.Is(err, io.EOF) || errors.Is(io.EOF, replication.ErrPaused) {
		t.Error("ErrPaused matches an unrelated error")
	}
}
