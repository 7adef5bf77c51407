package schemadump

import "testing"

func TestWithoutRestrictKey(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"older pg_restore", "SET x = 1;\nCREATE TABLE t ();\n", "SET x = 1;\nCREATE TABLE t ();\n"},
		{"both lines", "\\restrict k1\nCREATE TABLE t ();\n\\unrestrict k1\n", "CREATE TABLE t ();\n"},
		// A function body's line is kept: only the key's lines go.
		{"body line kept", "\\restrict k1\nSELECT '\n\\restrict other\n';\n\\unrestrict k1\n", "SELECT '\n\\restrict other\n';\n"},
	} {
		if got := withoutRestrictKey(tc.in); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
