package ledger

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// createTable finds the tables a migration creates, with whether it says
// IF NOT EXISTS and its first column.
var createTable = regexp.MustCompile(`(?i)CREATE TABLE (IF NOT EXISTS )?pgsync\.(\w+) \(\s*(\w+)`)

// TestMigrationsInvariants checks what Ensure and DeleteJob rely on: the
// versions are 1, 2, ... in order; each migration lists exactly the tables
// it creates, each keyed by job (DeleteJob deletes a job's rows from every
// one), none created twice; those a release before the version may have
// made leave an existing table as it is.
func TestMigrationsInvariants(t *testing.T) {
	if unversionedThrough > len(migrations) {
		t.Fatalf("unversionedThrough %d is past the last migration %d", unversionedThrough, len(migrations))
	}
	seen := map[string]int{}
	for i, m := range migrations {
		if m.version != i+1 {
			t.Errorf("migration %d (%s) has version %d, want %d", i, m.what, m.version, i+1)
		}
		if m.what == "" || strings.TrimSpace(m.sql) == "" {
			t.Errorf("migration %d: what %q, sql %q: both are needed", m.version, m.what, m.sql)
		}
		var created []string
		for _, c := range createTable.FindAllStringSubmatch(m.sql, -1) {
			ifNotExists, table, first := c[1] != "", c[2], c[3]
			created = append(created, table)
			if m.version <= unversionedThrough && !ifNotExists {
				t.Errorf("migration %d creates pgsync.%s without IF NOT EXISTS: a release before the version may have made it", m.version, table)
			}
			if first != "job" {
				t.Errorf("migration %d: pgsync.%s's first column is %s, want job (DeleteJob deletes by job)", m.version, table, first)
			}
			if v, dup := seen[table]; dup {
				t.Errorf("pgsync.%s is created by migrations %d and %d", table, v, m.version)
			}
			seen[table] = m.version
		}
		slices.Sort(created)
		listed := slices.Sorted(slices.Values(m.tables))
		if !slices.Equal(created, listed) {
			t.Errorf("migration %d creates %v but lists %v", m.version, created, listed)
		}
	}
	if _, ok := seen["schema_version"]; ok {
		t.Error("a migration creates pgsync.schema_version, which Ensure makes before the first one")
	}
}

// TestMigrationsCoverEveryTable: every table a job has rows in is made by
// a migration, so that Ensure leaves none for a command to find missing.
func TestMigrationsCoverEveryTable(t *testing.T) {
	var all []string
	for _, m := range migrations {
		all = append(all, m.tables...)
	}
	for _, want := range []string{"progress", "tables", "schema_archive", "schema_objects", "verifications", "large_objects", "locked_roles", "holds"} {
		if !slices.Contains(all, want) {
			t.Errorf("no migration makes pgsync.%s", want)
		}
	}
}
