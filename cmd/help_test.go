package cmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestEveryCommandExplainsItself: an operator reading --help learns what a
// command does beyond its one-line summary, and what its exit status means.
func TestEveryCommandExplainsItself(t *testing.T) {
	commands := []string{"", "check", "bootstrap", "run", "status", "verify", "sequences", "cutover", "add-tables", "teardown"}
	for _, name := range commands {
		var out, errOut bytes.Buffer
		args := []string{"--help"}
		if name != "" {
			args = []string{name, "--help"}
		}
		if code := Execute(context.Background(), args, &out, &errOut); code != ExitOK {
			t.Fatalf("pgsync %s --help: exit %d\n%s", name, code, errOut.String())
		}
		help := out.String()
		intro := help[:strings.Index(help, "Usage:")]
		if lines := strings.Count(strings.TrimSpace(intro), "\n"); lines < 3 {
			t.Errorf("pgsync %s --help says only:\n%s", name, intro)
		}
		if !strings.Contains(intro, "Exit status") {
			t.Errorf("pgsync %s --help does not give its exit status:\n%s", name, intro)
		}
	}
}
