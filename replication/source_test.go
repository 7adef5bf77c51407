package replication

import "testing"

// A permanent slot on a source with failover slots is created as one, in
// the option-list form; temporary slots and older sources keep the old
// syntax, which every supported major knows.
func TestCreateSlotSQL(t *testing.T) {
	for _, tc := range []struct {
		name      string
		temporary bool
		major     int
		want      string
	}{
		{"pgsync_move", false, 17, `CREATE_REPLICATION_SLOT "pgsync_move" LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)`},
		{"pgsync_move", false, 18, `CREATE_REPLICATION_SLOT "pgsync_move" LOGICAL pgoutput (SNAPSHOT 'export', FAILOVER true)`},
		{"pgsync_move", false, 16, `CREATE_REPLICATION_SLOT pgsync_move LOGICAL pgoutput EXPORT_SNAPSHOT`},
		{"pgsync_move", false, 12, `CREATE_REPLICATION_SLOT pgsync_move LOGICAL pgoutput EXPORT_SNAPSHOT`},
		{"pgsync_move_add", true, 17, `CREATE_REPLICATION_SLOT pgsync_move_add TEMPORARY LOGICAL pgoutput EXPORT_SNAPSHOT`},
		{"pgsync_move_add", true, 13, `CREATE_REPLICATION_SLOT pgsync_move_add TEMPORARY LOGICAL pgoutput EXPORT_SNAPSHOT`},
	} {
		if got := createSlotSQL(tc.name, tc.temporary, tc.major); got != tc.want {
			t.Errorf("createSlotSQL(%s, temporary %v, %d) = %s, want %s", tc.name, tc.temporary, tc.major, got, tc.want)
		}
	}
}
