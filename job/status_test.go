package job

import (
	"strings"
	"testing"
)

func TestRetainedWALWarning(t *testing.T) {
	cases := []struct {
		retained, limit int64
		warn            bool
	}{
		{100 << 20, -1, false},      // unlimited
		{100 << 20, 1 << 30, false}, // under half
		{600 << 20, 1 << 30, true},  // over half
	}
	for _, c := range cases {
		w := retainedWALWarning(c.retained, c.limit)
		if (w != "") != c.warn {
			t.Errorf("retained %d of %d: warning %q, want %v", c.retained, c.limit, w, c.warn)
		}
		if w != "" && !strings.Contains(w, "max_slot_wal_keep_size (1.0 GiB)") {
			t.Errorf("warning does not name the setting and its value: %q", w)
		}
	}
}
