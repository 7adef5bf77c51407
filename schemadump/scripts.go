package schemadump

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pg_restore writes the script of many entries in one run, in the list's
// order, each after a header of its own:
//
//	--
//	-- Name: t t_pkey; Type: CONSTRAINT; Schema: public; Owner: app
//	--
//
// after a prologue of settings (search_path, standard_conforming_strings
// ...) that every entry's statements need. Asking once for all the
// post-data entries, and cutting the script at the headers, saves a
// process per object (about 20 ms each, more with a large archive). The
// cut is trusted only when it gives one piece per entry, each under a
// header naming the entry's type; otherwise (an entry that writes nothing,
// a comment whose text holds a header) each entry of that batch is asked
// for alone, as before.

// scriptBatch bounds the entries of one pg_restore run, so that a script
// held in memory stays small whatever the number of objects.
const scriptBatch = 500

// prepareScripts reads the scripts of entries, scriptBatch at a time, into
// b.scripts by dump id. A batch that cannot be cut is left out: Build asks
// for its entries one at a time.
func (b *Builder) prepareScripts(ctx context.Context, entries []Entry) error {
	for start := 0; start < len(entries); start += scriptBatch {
		batch := entries[start:min(start+scriptBatch, len(entries))]
		script, err := b.restoreScript(ctx, batch)
		if err != nil {
			return err
		}
		b.restoreRuns++
		pieces, ok := cutScript(script, batch)
		if !ok {
			continue
		}
		for i, e := range batch {
			b.scripts[e.DumpID] = pieces[i]
		}
	}
	return nil
}

// Scripts says how many of the pending objects' scripts OpenBuilder read,
// and in how many pg_restore runs; the others are read one at a time.
func (b *Builder) Scripts() (objects, runs int) { return len(b.scripts), b.restoreRuns }

// restoreScript is pg_restore's script of entries, in their order, without
// its \restrict and \unrestrict lines (their key is pgsync's, and nothing
// else of the script is read as a meta-command).
func (b *Builder) restoreScript(ctx context.Context, entries []Entry) (string, error) {
	listFile, err := writeList(filepath.Dir(b.archive), entries)
	if err != nil {
		return "", err
	}
	defer os.Remove(listFile)
	args := []string{"--no-tablespaces", "--use-list=" + listFile, "--file=-"}
	if b.restrictKey != "" {
		args = append(args, "--restrict-key="+b.restrictKey)
	}
	cmd := exec.CommandContext(ctx, b.restore, append(args, b.archive)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		what := fmt.Sprintf("%d entries", len(entries))
		if len(entries) == 1 {
			what = entries[0].String()
		}
		return "", fmt.Errorf("pg_restore of %s: %w: %s", what, err, oneLine(stderr.String()))
	}
	script := out.String()
	if b.restrictKey != "" {
		var kept []string
		for _, line := range strings.Split(script, "\n") {
			if line == `\restrict `+b.restrictKey || line == `\unrestrict `+b.restrictKey {
				continue
			}
			kept = append(kept, line)
		}
		script = strings.Join(kept, "\n")
	}
	return script, nil
}

// cutScript cuts script, pg_restore's script of entries, into one script
// per entry: the prologue, then the entry's header and statements. ok is
// false unless there is exactly one header per entry, each of the entry's
// type, in order.
func cutScript(script string, entries []Entry) (pieces []string, ok bool) {
	lines := strings.SplitAfter(script, "\n")
	var starts []int // line index of each header's first "--"
	var types []string
	for i := 0; i+2 < len(lines); i++ {
		if strings.TrimRight(lines[i], "\n") != "--" || strings.TrimRight(lines[i+2], "\n") != "--" {
			continue
		}
		h := strings.TrimRight(lines[i+1], "\n")
		if !strings.HasPrefix(h, "-- Name: ") {
			continue
		}
		_, rest, found := strings.Cut(h, "; Type: ")
		typ, _, found2 := strings.Cut(rest, "; Schema: ")
		if !found || !found2 {
			return nil, false
		}
		starts, types = append(starts, i), append(types, typ)
	}
	if len(starts) != len(entries) {
		return nil, false
	}
	prologue := strings.Join(lines[:starts[0]], "")
	for i, e := range entries {
		if types[i] != e.Desc {
			return nil, false
		}
		end := len(lines)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		pieces = append(pieces, prologue+strings.Join(lines[starts[i]:end], ""))
	}
	return pieces, true
}
