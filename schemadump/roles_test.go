package schemadump

import (
	"slices"
	"testing"
)

// A schema dumped from a 15 source names pg_database_owner (the owner of
// schema public since 15): a 13 target cannot have it, a 15 target must.
func TestRolesTheTargetCanHave(t *testing.T) {
	roles := []string{"app", "pg_database_owner", "pg_monitor", "pg_read_all_data", "pg_checkpoint", "pg_maintain"}
	for _, tc := range []struct {
		versionNum int
		want       []string
	}{
		{130012, []string{"app", "pg_monitor"}},
		{140000, []string{"app", "pg_database_owner", "pg_monitor", "pg_read_all_data"}},
		{150008, []string{"app", "pg_database_owner", "pg_monitor", "pg_read_all_data", "pg_checkpoint"}},
		{170002, roles},
	} {
		if got := RolesTheTargetCanHave(roles, tc.versionNum); !slices.Equal(got, tc.want) {
			t.Errorf("RolesTheTargetCanHave(%d) = %v, want %v", tc.versionNum, got, tc.want)
		}
	}
}
