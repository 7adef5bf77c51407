package schemadump

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
)

// Extension is one extension of the source.
type Extension struct {
	Name, Version, Schema string
}

// String names the extension and its version.
func (e Extension) String() string { return e.Name + " " + e.Version }

// SourceExtensions lists the source's extensions but plpgsql (every
// database has it), in the order they were created, which is an order
// their dependencies allow.
func SourceExtensions(ctx context.Context, src *pgx.Conn) ([]Extension, error) {
	rows, err := src.Query(ctx, `SELECT e.extname::text, e.extversion, n.nspname::text
FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname <> 'plpgsql' ORDER BY e.oid`)
	if err != nil {
		return nil, fmt.Errorf("list the source's extensions: %w", err)
	}
	exts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Extension, error) {
		var e Extension
		err := r.Scan(&e.Name, &e.Version, &e.Schema)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("list the source's extensions: %w", err)
	}
	return exts, nil
}

// extensionGap is what the target's server lacks of one source
// extension.
type extensionGap struct {
	Extension
	installed bool // the server has some version of it
	// atVersion: the server has the source's version.
	atVersion bool
	major     int // the target server's major version, for the package name
}

// Gaps are the source extensions the target's server lacks, or
// lacks at the source's version.
type Gaps []extensionGap

// GapsOf compares the source's extensions with what the target's
// server has installed (pg_available_extension_versions).
func GapsOf(ctx context.Context, tgt *pgx.Conn, exts []Extension) (Gaps, error) {
	var gaps Gaps
	for _, e := range exts {
		g := extensionGap{Extension: e}
		err := tgt.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extension_versions WHERE name = $1),
  EXISTS (SELECT 1 FROM pg_available_extension_versions WHERE name = $1 AND version = $2),
  current_setting('server_version_num')::int / 10000`, e.Name, e.Version).Scan(&g.installed, &g.atVersion, &g.major)
		if err != nil {
			return nil, fmt.Errorf("look for extension %s on the target's server: %w", e.Name, err)
		}
		if !g.installed || !g.atVersion {
			gaps = append(gaps, g)
		}
	}
	return gaps, nil
}

// Refused words each extension the target's server does not have at all:
// the schema needs it and nothing can be created without it.
func (gaps Gaps) Refused() []string {
	var out []string
	for _, g := range gaps {
		if !g.installed {
			out = append(out, fmt.Sprintf("extension %s %s (schema %s) is not installed on the target's server: install the package that provides it there (Debian: contrib's come with postgresql-%d, others are packaged as postgresql-%d-%s)",
				g.Name, g.Version, g.Schema, g.major, g.major, g.Name))
		}
	}
	return out
}

// OtherVersion words each extension the target's server has, but not at
// the source's version: it is created at the server's default version.
func (gaps Gaps) OtherVersion() []string {
	var out []string
	for _, g := range gaps {
		if g.installed && !g.atVersion {
			out = append(out, g.String())
		}
	}
	return out
}

// createExtensions creates, in one transaction, the source's extensions
// whose schema the target has (public, most often) at the source's
// version where the target's server has it; pg_restore's CREATE EXTENSION
// IF NOT EXISTS then leaves them as they are. Those in a schema the dump
// creates are made by pg_restore, at the server's default version. created
// names those it made, in the order it made them, for dropExtensions.
func createExtensions(ctx context.Context, tgt *pgx.Conn, exts []Extension) (created []string, err error) {
	err = pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error {
		created = created[:0]
		for _, e := range exts {
			var create, atVersion bool
			if err := tx.QueryRow(ctx, `SELECT to_regnamespace(quote_ident($2)) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1),
  EXISTS (SELECT 1 FROM pg_available_extension_versions WHERE name = $1 AND version = $3)`, e.Name, e.Schema, e.Version).Scan(&create, &atVersion); err != nil {
				return fmt.Errorf("extension %s on the target: %w", e.Name, err)
			}
			if !create {
				continue
			}
			sql := "CREATE EXTENSION IF NOT EXISTS " + catalog.QuoteIdent(e.Name) + " WITH SCHEMA " + catalog.QuoteIdent(e.Schema)
			if atVersion {
				sql += " VERSION " + catalog.QuoteLiteral(e.Version)
			}
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("create extension %s on the target: %w", e, err)
			}
			created = append(created, e.Name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

// dropExtensions drops, in one transaction and in the reverse order of
// their creation, the extensions createExtensions made, after a pre-data
// restore that kept nothing failed: a refused bootstrap leaves nothing
// behind (issue 30). No CASCADE: the restore that could have made objects
// depend on them rolled back, so a drop that fails means someone else's
// object uses one, and that extension stays. It runs even when ctx was
// cancelled (the restore failed because of it), for a bounded while.
func dropExtensions(ctx context.Context, tgt *pgx.Conn, created []string) error {
	if len(created) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return pgx.BeginFunc(ctx, tgt, func(tx pgx.Tx) error {
		for i := len(created) - 1; i >= 0; i-- {
			if _, err := tx.Exec(ctx, "DROP EXTENSION IF EXISTS "+catalog.QuoteIdent(created[i])); err != nil {
				return fmt.Errorf("drop extension %s on the target: %w", created[i], err)
			}
		}
		return nil
	})
}

// VersionsDiffer names the extensions the target has at another
// version than the source's.
func VersionsDiffer(ctx context.Context, tgt *pgx.Conn, exts []Extension) ([]string, error) {
	var out []string
	for _, e := range exts {
		var version string
		err := tgt.QueryRow(ctx, `SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = $1), '')`, e.Name).Scan(&version)
		if err != nil {
			return nil, fmt.Errorf("read extension %s on the target: %w", e.Name, err)
		}
		if version != e.Version {
			out = append(out, fmt.Sprintf("%s (source %s, target %s)", e.Name, e.Version, strings.TrimSpace(version)))
		}
	}
	return out, nil
}

// EmptyExtensionTables empties the tables of created that an extension's
// CREATE EXTENSION, run by this bootstrap's pre-data restore, created
// with rows (its configuration tables, pg_extension_config_dump): the copy
// then brings the source's rows, the extension's own and those added
// since, once each, where it would otherwise add them a second time.
// Only tables this bootstrap created are given (created); emptied names
// those it emptied.
func EmptyExtensionTables(ctx context.Context, tgt *pgx.Conn, created []*catalog.Table) (emptied []string, err error) {
	if len(created) == 0 {
		return nil, nil
	}
	var members []string
	err = tgt.QueryRow(ctx, `SELECT coalesce(array_agg(c.oid::regclass::text ORDER BY 1), '{}')
FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
WHERE c.oid = ANY (SELECT to_regclass(x) FROM unnest($1::text[]) x)`, catalog.RefIdents(created)).Scan(&members)
	if err != nil {
		return nil, fmt.Errorf("look for extension tables among the created ones: %w", err)
	}
	if len(members) == 0 {
		return nil, nil
	}
	if _, err := tgt.Exec(ctx, "TRUNCATE ONLY "+strings.Join(members, ", ")); err != nil {
		return nil, fmt.Errorf("empty the rows CREATE EXTENSION put in %s: %w", strings.Join(members, ", "), err)
	}
	return members, nil
}
