package schemadump

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDoesNotImportJob: the pg_dump and pg_restore driving is a package
// below job, which calls it; an import of job (or cmd) would turn the
// dependency around.
func TestDoesNotImportJob(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("list the package's files: %v (%d)", err, len(files))
	}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasSuffix(path, "/pgsync/job") || strings.HasSuffix(path, "/pgsync/cmd") {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
