package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/BurntSushi/toml"
)

// ReversePath is where cutover --reverse writes the reverse job's
// configuration: name.toml beside the file at path.
func ReversePath(path, name string) string {
	return filepath.Join(filepath.Dir(path), name+".toml")
}

// CheckReverse says whether the reverse job's configuration may be
// written for cfg (read from path) under name: the file is free, or it is
// already that job's (the same name, source and target swapped), which a
// rerun or the way forward after a rollback finds. It writes nothing.
func CheckReverse(path string, cfg *Config, name string) error {
	out := ReversePath(path, name)
	existing, err := Load(out)
	var cerr *Error
	switch {
	case err == nil:
		if existing.Job == name && existing.SourceURL == cfg.TargetURL && existing.TargetURL == cfg.SourceURL {
			return nil
		}
		return fmt.Errorf("%s exists and is not the configuration of job %s from %s to %s: move it away, or name the reverse job with --reverse-job",
			out, name, Redact(cfg.TargetURL), Redact(cfg.SourceURL))
	case errors.As(err, &cerr) && errors.Is(statErr(out), os.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("%s exists and does not read as a configuration (%v): move it away, or name the reverse job with --reverse-job", out, err)
	}
}

func statErr(path string) error {
	_, err := os.Stat(path)
	return err
}

// WriteReverse writes the reverse job's configuration for cfg, read from
// path: the same file with source and target swapped and job.name set to
// name (the tables and tuning kept), readable by its owner only, since its
// URLs may hold passwords. A file that is already that job's is left as it
// is (CheckReverse). It returns the file's path.
func WriteReverse(path string, cfg *Config, name string) (string, error) {
	out := ReversePath(path, name)
	if err := CheckReverse(path, cfg, name); err != nil {
		return out, err
	}
	if _, err := os.Stat(out); err == nil {
		return out, nil // already this job's
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return out, err
	}
	var doc map[string]any
	if _, err := toml.Decode(string(raw), &doc); err != nil {
		return out, &Error{File: path, Msg: err.Error()}
	}
	section := func(name string) map[string]any {
		m, ok := doc[name].(map[string]any)
		if !ok {
			m = map[string]any{}
			doc[name] = m
		}
		return m
	}
	// The URLs as the forward job used them, environment included: the
	// reverse job's are in its file.
	section("source")["url"] = cfg.TargetURL
	section("target")["url"] = cfg.SourceURL
	section("job")["name"] = name
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by pgsync cutover --reverse for job %s: job %s with source and target swapped.\n", cfg.Job, name)
	if err := toml.NewEncoder(&b).Encode(doc); err != nil {
		return out, fmt.Errorf("write %s: %w", out, err)
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return out, fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return out, fmt.Errorf("write %s: %w", out, err)
	}
	return out, nil
}
