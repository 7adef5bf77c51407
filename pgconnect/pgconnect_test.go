package pgconnect

import (
	"strings"
	"testing"
)

// Every host of a url with several is named, each once, and never the
// password.
func TestHosts(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"postgres://u:secret@db1:5432,db2:5433/app?target_session_attrs=read-write", "db1:5432,db2:5433"},
		{"host=a,b port=5432,5433 user=u password=secret dbname=app", "a:5432,b:5433"},
		{"postgres://u:secret@db1/app?sslmode=prefer", "db1:5432"},
		{"postgres://u@[::1]:5432/app?sslmode=disable", "[::1]:5432"},
		{"host=/var/run/postgresql port=5433 dbname=app", "/var/run/postgresql:5433"},
		{"postgres://u@db1:notaport/app", ""},
	} {
		got := Hosts(tc.url)
		if got != tc.want {
			t.Errorf("Hosts(%q) = %q, want %q", tc.url, got, tc.want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("Hosts(%q) = %q names the password", tc.url, got)
		}
	}
}

// TestWithSetting: the setting reaches pgx's runtime parameters from both
// forms of url, beside what the url already sets.
func TestWithSetting(t *testing.T) {
	for _, url := range []string{
		"postgres://u:p@127.0.0.1:5432/db",
		"postgres://u@127.0.0.1:5432/db?sslmode=disable",
		"host=127.0.0.1 port=5432 user=u dbname=db",
	} {
		cfg, err := ParseConfig(WithSetting(url, "maintenance_work_mem", "256MB"))
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if got := cfg.RuntimeParams["maintenance_work_mem"]; got != "256MB" || cfg.Database != "db" || cfg.User != "u" {
			t.Errorf("%s: maintenance_work_mem %q, database %q, user %q", url, got, cfg.Database, cfg.User)
		}
	}
}
