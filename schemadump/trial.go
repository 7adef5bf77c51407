package schemadump

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TrialSchema runs each entry of the schema, pre-data and then post-data
// (after Dump and ReadTOC), on the target, each under a savepoint of one transaction that is rolled
// back, and returns those the target refused, each with its error: a
// target of an older major than the source cannot hold what the newer
// version added (issue 32: an int4multirange column from 15 into 13),
// which pg_restore would find only at bootstrap. Each entry's SQL comes
// from pg_restore of that one entry (its list of one line), never from
// splitting the SQL text of the whole section. Nothing stays on the
// target; an entry that depends on a refused one is refused too, and named.
func (d *Scope) TrialSchema(ctx context.Context, tgt *pgx.Conn) (refused []string, err error) {
	file, cleanup, err := writeArchive(d.Archive)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	tx, err := tgt.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("try the schema on the target: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the rollback is the point; its error changes nothing
	entries := append([]Entry(nil), d.PreData...)
	// Post-data in the order bootstrap builds it: keys before the
	// foreign keys that need them.
	post := append([]Object(nil), d.PostData...)
	sort.SliceStable(post, func(i, j int) bool { return post[i].Phase < post[j].Phase })
	for _, o := range post {
		entries = append(entries, o.Entry)
	}
	for _, e := range entries {
		sql, err := entrySQL(ctx, d.Restore, file, e)
		if err != nil {
			return refused, err
		}
		if _, err := tx.Exec(ctx, "SAVEPOINT pgsync_trial"); err != nil {
			return refused, fmt.Errorf("try the schema on the target: %w", err)
		}
		// The simple protocol: an entry is several statements (its SETs,
		// the object, its comment or grants).
		_, execErr := tx.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
		var pgErr *pgconn.PgError
		switch {
		case execErr == nil:
			_, err = tx.Exec(ctx, "RELEASE SAVEPOINT pgsync_trial")
		case errors.As(execErr, &pgErr):
			refused = append(refused, fmt.Sprintf("%s: %s", e, pgErr.Message))
			_, err = tx.Exec(ctx, "ROLLBACK TO SAVEPOINT pgsync_trial")
		default:
			return refused, fmt.Errorf("try %s on the target: %w", e, execErr)
		}
		if err != nil {
			return refused, fmt.Errorf("try the schema on the target: %w", err)
		}
	}
	return refused, nil
}

// entrySQL is pg_restore's SQL of one entry of archive (a file).
func entrySQL(ctx context.Context, program, archive string, e Entry) (string, error) {
	list, err := writeList(filepath.Dir(archive), []Entry{e})
	if err != nil {
		return "", err
	}
	defer os.Remove(list)
	cmd := exec.CommandContext(ctx, program, "--no-tablespaces", "--use-list="+list, "--file=-", archive)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("pg_restore of %s: %w: %s", e, err, oneLine(stderr.String()))
	}
	return withoutRestrictKey(out.String()), nil
}

// withoutRestrictKey removes the psql meta-commands "\restrict KEY" and
// "\unrestrict KEY" that pg_restore's SQL carries since the releases of
// August 2025 (CVE-2025-8714): only psql knows them, and the server
// refuses them. KEY is random and read from the first such line, so no
// line of a function's body is taken for one. An older pg_restore
// writes none, and has no --restrict-key to set it.
func withoutRestrictKey(sql string) string {
	lines := strings.Split(sql, "\n")
	key := ""
	for _, l := range lines {
		if k, ok := strings.CutPrefix(l, `\restrict `); ok && k != "" {
			key = k
			break
		}
	}
	if key == "" {
		return sql
	}
	kept := lines[:0]
	for _, l := range lines {
		if l != `\restrict `+key && l != `\unrestrict `+key {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n")
}
