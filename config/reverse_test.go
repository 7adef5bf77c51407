package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteReverse: the reverse job's file is the forward one with source
// and target swapped and the reverse name, its tuning kept, readable by
// its owner only; a file already that job's is left as it is; a file of
// anything else is refused, and nothing is written.
func TestWriteReverse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "move.toml")
	src, tgt := "postgres://a@127.0.0.1:5432/app", "postgres://b@127.0.0.1:5433/app"
	text := "[source]\nurl = \"" + src + "\"\n[target]\nurl = \"" + tgt + "\"\n[job]\nname = \"move\"\ntables = [\"public.*\"]\n[tuning]\nmax_batch_rows = 100\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out, err := WriteReverse(path, cfg, "move_back")
	if err != nil || out != filepath.Join(dir, "move_back.toml") {
		t.Fatalf("WriteReverse: %s, %v", out, err)
	}
	back, err := Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if back.Job != "move_back" || back.SourceURL != tgt || back.TargetURL != src || back.Tuning.MaxBatchRows != 100 || strings.Join(back.Tables, ",") != "public.*" {
		t.Errorf("reverse configuration: %+v", back)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// Again, as a rerun or the way forward finds it: left as it is.
	before, _ := os.ReadFile(out)
	if _, err := WriteReverse(path, cfg, "move_back"); err != nil {
		t.Errorf("a second WriteReverse of the same job: %v", err)
	}
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Error("the second WriteReverse rewrote the file")
	}
	// The way forward from the reverse job is the forward job's own file:
	// the same job, so it passes and is left as it is.
	if err := CheckReverse(out, back, "move"); err != nil {
		t.Errorf("the way forward over the original file: %v", err)
	}
	other := filepath.Join(dir, "other_back.toml")
	if err := os.WriteFile(other, []byte("# not a configuration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteReverse(path, cfg, "other_back"); err == nil || !strings.Contains(err.Error(), other) {
		t.Errorf("WriteReverse over another file: %v", err)
	}
	if b, _ := os.ReadFile(other); string(b) != "# not a configuration\n" {
		t.Error("the refused WriteReverse wrote the file")
	}
}
