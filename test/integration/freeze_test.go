//go:build integration

package integration

import (
	"regexp"
	"testing"
)

// vacuumFreezeWAL is the WAL the first VACUUM (FREEZE) of a target table
// writes after a checkpoint: next to nothing when the copy loaded it
// frozen, about the table's size when it did not.
func (e *env) vacuumFreezeWAL(table string) int64 {
	e.t.Helper()
	e.tgtExec("CHECKPOINT")
	before := queryOne[string](e.t, e.tgt, "SELECT pg_current_wal_insert_lsn()::text")
	e.tgtExec("VACUUM (FREEZE) " + table)
	return queryOne[int64](e.t, e.tgt, "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint", before)
}

// TestBootstrapLoadsTablesFrozen: a table copied whole into an empty target
// table is emptied and loaded with COPY ... FREEZE in one transaction, so
// the first VACUUM (FREEZE) afterwards has nothing to write (issue 18). A
// target table that a foreign key of the operator's references cannot be
// truncated: it is copied as before, and its vacuum writes its pages. Rows
// the operator put in a target table are never truncated: bootstrap refuses
// such a table before any copy (TestRefusedBootstrapRecordsNothing), and the
// copy checks again under its lock (emptyForFreeze).
func TestBootstrapLoadsTablesFrozen(t *testing.T) {
	schema := `CREATE TABLE parent (id int PRIMARY KEY, pad text);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent, pad text);`
	e := newEnv(t, schema+`
INSERT INTO parent SELECT g, repeat('p', 200) FROM generate_series(1, 20000) g;
INSERT INTO child SELECT g, g, repeat('c', 200) FROM generate_series(1, 20000) g;`, "")
	e.tgtExec(schema) // the operator's target, with its foreign key before the copy
	r := e.mustPgsync("bootstrap")
	for table, frozen := range map[string]string{"child": "true", "parent": "false"} {
		if !regexp.MustCompile(`msg="table copied" table=public\.` + table + ` .* frozen=` + frozen).MatchString(r.stderr) {
			t.Errorf("bootstrap's log does not say public.%s was copied with frozen=%s:\n%s", table, frozen, r.stderr)
		}
	}
	e.mustVerify()
	size := queryOne[int64](t, e.tgt, "SELECT pg_relation_size('child')")
	if wal := e.vacuumFreezeWAL("child"); wal > size/20 {
		t.Errorf("VACUUM (FREEZE) of the table copied frozen wrote %d bytes of WAL; the table is %d bytes", wal, size)
	}
	if wal := e.vacuumFreezeWAL("parent"); wal < size/2 {
		t.Errorf("VACUUM (FREEZE) of the table copied unfrozen wrote only %d bytes of WAL (table %d bytes): the test cannot tell frozen from not", wal, size)
	}
}
