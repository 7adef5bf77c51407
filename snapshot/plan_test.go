package snapshot

import (
	"testing"

	"github.com/pgsync/pgsync/catalog"
)

// The move of issue 25: a 6M-row table of 770 MB (heap) is cut into 64 MB
// ranges, and a table of TOASTed documents, 178 MB with a small heap, is
// copied whole. Its one part is larger than each range: it is taken first,
// and the ranges follow in block order.
func TestPlanTakesTheLargestPartFirst(t *testing.T) {
	col := []catalog.Column{{Name: "id"}}
	accounts := &catalog.Table{Schema: "public", Name: "pgbench_accounts", Columns: col, SizeBytes: 900 << 20}
	documents := &catalog.Table{Schema: "public", Name: "documents", Columns: col, SizeBytes: 178 << 20}
	tellers := &catalog.Table{Schema: "public", Name: "pgbench_tellers", Columns: col, SizeBytes: 40 << 10}
	l := layout{blockSize: 8192, tidRange: true,
		blocks: map[string]int64{accounts.Ident(): 770 << 7, documents.Ident(): 3 << 7, tellers.Ident(): 5}}
	opts := Options{MaxParallel: 2, RangeBytes: 64 << 20}
	parts := byLargest(cutParts(opts, l, []*catalog.Table{accounts, documents, tellers}))
	if len(parts) != 15 {
		t.Fatalf("%d parts, want 13 ranges and 2 whole tables", len(parts))
	}
	if parts[0].table.t != documents || parts[0].split {
		t.Fatalf("first part is %s (split %v), want documents whole", parts[0].table.t, parts[0].split)
	}
	for i, p := range parts[1:13] {
		if p.table.t != accounts || p.from != uint32(i)*64<<7 {
			t.Fatalf("part %d: %s from block %d, want accounts from %d", i+1, p.table.t, p.from, i*64<<7)
		}
	}
	// The last range reads to the end; its 2 MB come after the first 12.
	if last := parts[13]; last.table.t != accounts || last.to != 0 {
		t.Fatalf("part 13: %s to %d, want accounts' last range", last.table.t, last.to)
	}
	if parts[14].table.t != tellers {
		t.Fatalf("last part is %s, want the smallest table", parts[14].table.t)
	}
}
