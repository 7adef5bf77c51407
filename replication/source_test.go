package replication

import "testing"

// A failover slot is created in the option-list form; other slots keep
// the old syntax, which every supported major knows.
func TestCreateSlotSQL(t *testing.T) {
	for _, tc := range []struct {
		name      string
		temporary bool
		failover  bool
		want      string
	}{
		{"pgsync_move", false, true, `CREATE_REPLICATION_SLOT "pgsync_move" LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)`},
		{"pgsync_move", false, false, `CREATE_REPLICATION_SLOT pgsync_move LOGICAL pgoutput EXPORT_SNAPSHOT`},
		{"pgsync_move_add", true, false, `CREATE_REPLICATION_SLOT pgsync_move_add TEMPORARY LOGICAL pgoutput EXPORT_SNAPSHOT`},
	} {
		if got := createSlotSQL(tc.name, tc.temporary, tc.failover); got != tc.want {
			t.Errorf("createSlotSQL(%s, temporary %v, failover %v) = %s, want %s", tc.name, tc.temporary, tc.failover, got, tc.want)
		}
	}
}
