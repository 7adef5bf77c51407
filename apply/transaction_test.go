package apply

import (
	"testing"
	"time"
)

// TestKeepGroupOpen: a group stays open for the next source transaction
// only when one is waiting, under its size and age limits, and when it ran
// no captured DDL statement (a value an ALTER TYPE ... ADD VALUE added is
// usable only after the commit of the transaction that added it).
func TestKeepGroupOpen(t *testing.T) {
	for _, c := range []struct {
		name   string
		more   bool
		ranDDL bool
		bytes  int64
		age    time.Duration
		want   bool
	}{
		{"more waiting, under the limits", true, false, 10, 0, true},
		{"nothing waiting", false, false, 10, 0, false},
		{"ran DDL", true, true, 10, 0, false},
		{"full", true, false, 100, 0, false},
		{"old", true, false, 10, maxGroupAge, false},
	} {
		if got := keepGroupOpen(c.more, c.ranDDL, c.bytes, 100, c.age); got != c.want {
			t.Errorf("%s: keepGroupOpen = %v, want %v", c.name, got, c.want)
		}
	}
}
