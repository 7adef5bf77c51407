package pgconnect

import "testing"

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
