package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/pgsync/pgsync/apply"
	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/config"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
)

// Check statuses.
const (
	checkOK   = "OK"
	checkWarn = "WARN"
	checkFail = "FAIL"
)

// checkItem is one line of pgsync check.
type checkItem struct {
	Item   string `json:"item"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// checks collects the items of a preflight.
type checks []checkItem

func (c *checks) add(item, status, detail, fix string) {
	*c = append(*c, checkItem{Item: item, Status: status, Detail: detail, Fix: fix})
}

func (c checks) failed() []checkItem {
	var out []checkItem
	for _, it := range c {
		if it.Status == checkFail {
			out = append(out, it)
		}
	}
	return out
}

func (a *app) checkCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "check",
		Short: "Check, read-only, that bootstrap and run will work; one line per item with the fix",
		Long: `check connects to both servers and reports, one line per item, OK, WARN or
FAIL with the fix: versions, wal_level, free slots and WAL senders, the
REPLICATION attribute, SELECT and ownership of every selected table (a
publication needs both), replica identities, the target role's right to set
session_replication_role, each target table (present and compatible, or to
be created), statement triggers that would fire for replicated rows,
max_slot_wal_keep_size and the size of the copy. It changes
nothing. Free disk space is not checked on either side: compare the copy
size with the target's free space yourself.

Exit status: 0 when nothing FAILs (WARN alone is 0), 1 otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			items := a.preflight(cmd.Context(), cfg, true)
			if asJSON {
				enc := json.NewEncoder(a.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(items); err != nil {
					return err
				}
			} else {
				for _, it := range items {
					line := fmt.Sprintf("%-4s  %-26s %s", it.Status, it.Item, it.Detail)
					if it.Fix != "" {
						line += " (fix: " + it.Fix + ")"
					}
					fmt.Fprintln(a.stdout, line)
				}
			}
			if failed := items.failed(); len(failed) > 0 {
				return failf(ExitFailed, "%d of %d checks failed: %s", len(failed), len(items), failedItems(failed))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the items as JSON")
	return c
}

func failedItems(failed []checkItem) string {
	parts := make([]string, len(failed))
	for i, it := range failed {
		parts[i] = it.Item + ": " + it.Detail
		if it.Fix != "" {
			parts[i] += " (fix: " + it.Fix + ")"
		}
	}
	return strings.Join(parts, "; ")
}

// preflight runs every check that needs no change on either server.
// emptiness says whether to require empty target tables; bootstrap judges
// that itself (--force, an interrupted copy).
func (a *app) preflight(ctx context.Context, cfg *config.Config, emptiness bool) checks {
	var c checks
	src, err := pgconnect.Connect(ctx, "source", cfg.SourceURL)
	if err != nil {
		c.add("source", checkFail, oneLine(err.Error()), "check source.url and that the server listens")
	} else {
		defer src.Close(context.WithoutCancel(ctx))
	}
	tgt, err := pgconnect.Connect(ctx, "target", cfg.TargetURL)
	if err != nil {
		c.add("target", checkFail, oneLine(err.Error()), "check target.url and that the server listens")
	} else {
		defer tgt.Close(context.WithoutCancel(ctx))
	}
	var tables []catalog.Table
	if src != nil {
		tables = checkSource(ctx, &c, cfg, src)
	}
	if tgt != nil {
		checkTarget(ctx, &c, cfg, src, tgt, tables, emptiness)
	}
	return c
}

// checkSource adds the source's items and returns the selected tables.
func checkSource(ctx context.Context, c *checks, cfg *config.Config, src *pgx.Conn) []catalog.Table {
	s, err := replication.ReadSourceSettings(ctx, src)
	if err != nil {
		c.add("source", checkFail, oneLine(err.Error()), "")
		return nil
	}
	c.add("source", checkOK, "PostgreSQL "+s.Version+", user "+s.User, "")
	if s.WALLevel == "logical" {
		c.add("wal_level", checkOK, "logical", "")
	} else {
		c.add("wal_level", checkFail, fmt.Sprintf("%q", s.WALLevel), "set wal_level = logical in postgresql.conf and restart the source")
	}
	if s.UsedSlots < s.MaxSlots {
		c.add("replication slots", checkOK, fmt.Sprintf("%d of %d used", s.UsedSlots, s.MaxSlots), "")
	} else {
		c.add("replication slots", checkFail, fmt.Sprintf("%d of %d used", s.UsedSlots, s.MaxSlots), "raise max_replication_slots and restart the source")
	}
	if s.UsedSenders < s.MaxSenders {
		c.add("wal senders", checkOK, fmt.Sprintf("%d of %d used", s.UsedSenders, s.MaxSenders), "")
	} else {
		c.add("wal senders", checkFail, fmt.Sprintf("%d of %d used", s.UsedSenders, s.MaxSenders), "raise max_wal_senders and restart the source")
	}
	if s.CanReplicate {
		c.add("REPLICATION", checkOK, "user "+s.User+" may replicate", "")
	} else {
		c.add("REPLICATION", checkFail, "user "+s.User+" lacks the REPLICATION attribute", "ALTER ROLE "+catalog.QuoteIdent(s.User)+" REPLICATION")
	}
	if s.MaxSlotWALKeepSizeMB < 0 {
		c.add("max_slot_wal_keep_size", checkWarn, "unlimited: a slot left behind (a stopped run) keeps WAL until the source's disk is full",
			"set max_slot_wal_keep_size (e.g. to a quarter of the free WAL disk) and reload")
	} else {
		c.add("max_slot_wal_keep_size", checkOK, humanize.IBytes(uint64(s.MaxSlotWALKeepSizeMB)<<20), "")
	}

	tables, err := catalog.Resolve(ctx, src, cfg.Tables)
	if err != nil {
		c.add("tables", checkFail, oneLine(err.Error()), "")
		return nil
	}
	if len(tables) == 0 {
		c.add("tables", checkFail, "no source table matches job.tables "+strings.Join(cfg.Tables, ", "), "fix job.tables")
		return nil
	}
	c.add("tables", checkOK, fmt.Sprintf("%d selected", len(tables)), "")
	if unlogged, err := catalog.UnloggedMatches(ctx, src, cfg.Tables); err == nil && len(unlogged) > 0 {
		names := make([]string, len(unlogged))
		for i, t := range unlogged {
			names[i] = t.String()
		}
		c.add("unlogged tables", checkWarn, "skipped, logical replication cannot publish them: "+strings.Join(names, ", "), "ALTER TABLE ... SET LOGGED to include one")
	}

	var noIdentity, identityFixes, noSelect, notOwned []string
	var total int64
	for i := range tables {
		t := &tables[i]
		if !t.Replicable() {
			noIdentity = append(noIdentity, t.String())
			identityFixes = append(identityFixes, "ALTER TABLE "+t.Ident()+" REPLICA IDENTITY FULL")
		}
		total += t.SizeBytes
	}
	rows, err := src.Query(ctx, `SELECT t, has_table_privilege(t, 'SELECT'),
       pg_has_role((SELECT relowner FROM pg_class WHERE oid = t::regclass), 'USAGE')
FROM unnest($1::text[]) t`, catalog.Idents(tables))
	if err == nil {
		for rows.Next() {
			var t string
			var sel, own bool
			if err = rows.Scan(&t, &sel, &own); err != nil {
				break
			}
			if !sel {
				noSelect = append(noSelect, t)
			}
			if !own {
				notOwned = append(notOwned, t)
			}
		}
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		c.add("table privileges", checkFail, oneLine(err.Error()), "")
	}
	switch {
	case len(noIdentity) > 0:
		c.add("replica identity", checkFail, "no primary key or replica identity: "+strings.Join(noIdentity, ", "),
			strings.Join(identityFixes, "; ")+"; or add a primary key")
	default:
		c.add("replica identity", checkOK, "every table has a primary key or replica identity", "")
	}
	if len(noSelect) > 0 {
		c.add("SELECT", checkFail, "user "+s.User+" cannot read "+strings.Join(noSelect, ", "), "GRANT SELECT ON <table> TO "+catalog.QuoteIdent(s.User))
	} else if err == nil {
		c.add("SELECT", checkOK, "every table is readable", "")
	}
	var canPublish bool
	if qerr := src.QueryRow(ctx, "SELECT has_database_privilege(current_database(), 'CREATE')").Scan(&canPublish); qerr != nil {
		c.add("publication", checkFail, oneLine(qerr.Error()), "")
	} else if !canPublish {
		c.add("publication", checkFail, "user "+s.User+" lacks CREATE on the source database, which CREATE PUBLICATION needs",
			"GRANT CREATE ON DATABASE <source database> TO "+catalog.QuoteIdent(s.User))
	}
	if len(notOwned) > 0 {
		c.add("publication", checkFail, "a publication takes only tables its creator owns; user "+s.User+" does not own "+strings.Join(notOwned, ", "),
			"run as the tables' owner, or GRANT <owner> TO "+catalog.QuoteIdent(s.User))
	} else if err == nil && canPublish {
		c.add("publication", checkOK, "user "+s.User+" may create the publication and owns every table", "")
	}
	c.add("copy size", checkOK, fmt.Sprintf("%s on disk in %d tables (indexes and TOAST included); free disk is not checked", humanize.IBytes(uint64(total)), len(tables)), "")
	return tables
}

// checkTarget adds the target's items; src is nil when the source is
// unreachable, and then the tables are not judged.
func checkTarget(ctx context.Context, c *checks, cfg *config.Config, src, tgt *pgx.Conn, tables []catalog.Table, emptiness bool) {
	var version, user string
	var canCreate bool
	if err := tgt.QueryRow(ctx, `SELECT current_setting('server_version'), current_user::text,
       has_database_privilege(current_database(), 'CREATE') OR to_regnamespace('pgsync') IS NOT NULL`).Scan(&version, &user, &canCreate); err != nil {
		c.add("target", checkFail, oneLine(err.Error()), "")
		return
	}
	c.add("target", checkOK, "PostgreSQL "+version+", user "+user, "")
	if canCreate {
		c.add("pgsync schema", checkOK, "pgsync.progress can be created or exists", "")
	} else {
		c.add("pgsync schema", checkFail, "user "+user+" cannot create schema pgsync", "GRANT CREATE ON DATABASE <target database> TO "+catalog.QuoteIdent(user))
	}
	if err := pgconnect.ReplicaSession(ctx, tgt); err != nil {
		fix := ""
		if errors.Is(err, pgconnect.ErrReplicaRole) {
			fix = "GRANT SET ON PARAMETER session_replication_role TO " + catalog.QuoteIdent(user) + " (PostgreSQL 15+), or a superuser"
		}
		c.add("session_replication_role", checkFail, oneLine(err.Error()), fix)
	} else {
		c.add("session_replication_role", checkOK, "the target session can set replica", "")
	}
	if prog, err := apply.ReadProgress(ctx, tgt, cfg.Job); err == nil {
		c.add("job", checkWarn, fmt.Sprintf("job %s already has progress on the target (state %s)", cfg.Job, prog.State),
			"pgsync run continues it; bootstrap --force starts it over")
	}
	if src == nil || len(tables) == 0 {
		return
	}
	var created []*catalog.Table
	for i := range tables {
		t := &tables[i]
		have, ok, err := catalog.Lookup(ctx, tgt, t.Schema, t.Name)
		switch {
		case err != nil:
			c.add("table "+t.String(), checkFail, oneLine(err.Error()), "")
			continue
		case !ok:
			created = append(created, t)
			c.add("table "+t.String(), checkOK, "missing on the target: bootstrap creates it", "")
			continue
		}
		if missing := catalog.MissingColumns(t, &have); len(missing) > 0 {
			c.add("table "+t.String(), checkFail, "the target lacks source column(s) "+strings.Join(missing, ", "), "add them on the target, or drop the table so that bootstrap creates it")
			continue
		}
		if differ := catalog.DifferentTypes(t, &have); len(differ) > 0 {
			c.add("table "+t.String(), checkFail, strings.Join(differ, "; "), "give the target columns the source's types")
			continue
		}
		if emptiness {
			var nonEmpty bool
			if err := tgt.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+t.Ident()+")").Scan(&nonEmpty); err != nil {
				c.add("table "+t.String(), checkFail, oneLine(err.Error()), "")
				continue
			}
			if nonEmpty {
				c.add("table "+t.String(), checkFail, "not empty on the target: bootstrap copies into empty tables", "empty it, or bootstrap --force to replace its rows")
				continue
			}
		}
		c.add("table "+t.String(), checkOK, "present and compatible", "")
	}
	checkStatementTriggers(ctx, c, tgt, tables)
	if missing, err := catalog.MissingDefaultFunctions(ctx, src, tgt, created); err != nil {
		c.add("default functions", checkFail, oneLine(err.Error()), "")
	} else if len(missing) > 0 {
		c.add("default functions", checkFail, "column defaults call functions the target lacks: "+strings.Join(missing, "; "), "create them on the target (pgsync creates no functions)")
	}
}

// checkStatementTriggers warns about statement-level INSERT, UPDATE or
// DELETE triggers that fire for replicas (ENABLE REPLICA or ALWAYS) on the
// job's target tables. PostgreSQL's apply worker fires row triggers only;
// pgsync applies rows with statements (a run, a COPY), each of which fires
// such a trigger once. TRUNCATE's fire in both.
func checkStatementTriggers(ctx context.Context, c *checks, tgt *pgx.Conn, tables []catalog.Table) {
	rows, err := tgt.Query(ctx, `SELECT tgrelid::regclass::text || ': ' || tgname
FROM pg_trigger
WHERE NOT tgisinternal AND tgenabled IN ('R', 'A')
  AND tgtype & 1 = 0          -- FOR EACH STATEMENT
  AND tgtype & (4 | 8 | 16) <> 0 -- INSERT, DELETE or UPDATE
  AND tgrelid = ANY (SELECT to_regclass(n) FROM unnest($1::text[]) n)
ORDER BY 1`, catalog.Idents(tables))
	if err != nil {
		c.add("statement triggers", checkFail, oneLine(err.Error()), "")
		return
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		c.add("statement triggers", checkFail, oneLine(err.Error()), "")
		return
	}
	if len(found) > 0 {
		c.add("statement triggers", checkWarn, "enabled for replicas on the target, they fire once for each statement pgsync applies, where PostgreSQL's apply worker fires none: "+strings.Join(found, "; "),
			"make them row triggers, or ALTER TABLE ... ENABLE TRIGGER (not REPLICA or ALWAYS) if they are for the application's own writes")
	}
}
