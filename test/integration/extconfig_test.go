//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// installTestExtension writes a small extension with a configuration table
// (pg_extension_config_dump) into the servers' installation, which both
// test clusters share, and removes it when the test ends. No contrib
// extension of PostgreSQL 15 has a configuration table.
func installTestExtension(t *testing.T) {
	t.Helper()
	admin := mustConnect(t, adminURL(sourcePort))
	defer admin.Close(context.Background())
	shareDir := queryOne[string](t, admin, "SELECT setting FROM pg_config() WHERE name = 'SHAREDIR'")
	files := map[string]string{
		"pgsync_test_cfg.control": "comment = 'pgsync test: an extension with a configuration table'\ndefault_version = '1.0'\nrelocatable = false\nschema = public\n",
		"pgsync_test_cfg--1.0.sql": `CREATE TABLE cfg_items (id int PRIMARY KEY, name text NOT NULL, builtin boolean NOT NULL DEFAULT false);
INSERT INTO cfg_items VALUES (1, 'shipped with the extension', true), (2, 'also shipped', true);
SELECT pg_catalog.pg_extension_config_dump('cfg_items', 'WHERE NOT builtin');
`,
	}
	for name, body := range files {
		path := filepath.Join(shareDir, "extension", name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatalf("install the test extension (the test needs to write the servers' extension directory): %v", err)
		}
		t.Cleanup(func() { _ = os.Remove(path) })
	}
}

// TestExtensionConfigTableCopiedOnce: a job that selects an extension's
// configuration table, into an empty target. CREATE EXTENSION there puts
// the extension's own rows in it; bootstrap empties them before the copy,
// which brings the source's rows (the extension's and those added since)
// once each, where it used to add them a second time and fail on the key
// (issue 22). Changes to the table then stream as to any other.
func TestExtensionConfigTableCopiedOnce(t *testing.T) {
	installTestExtension(t)
	e := newEnv(t, `CREATE EXTENSION pgsync_test_cfg;
INSERT INTO cfg_items VALUES (3, 'added by the user', false);
CREATE TABLE orders (id int PRIMARY KEY, item int);
INSERT INTO orders VALUES (1, 3);`, "")
	e.mustPgsync("bootstrap")
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(id::text || ':' || builtin, ',' ORDER BY id) FROM cfg_items"); got != "1:true,2:true,3:false" {
		t.Fatalf("cfg_items on the target: %s, want each source row once (1:true,2:true,3:false)", got)
	}
	e.srcExec("INSERT INTO cfg_items VALUES (4, 'added later', false); UPDATE cfg_items SET name = 'renamed' WHERE id = 1")
	e.catchUp()
	e.mustVerify()
}
