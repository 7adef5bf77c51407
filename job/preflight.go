package job

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
	"github.com/pgsync/pgsync/pgconnect"
	"github.com/pgsync/pgsync/replication"
)

// Check statuses.
const (
	CheckOK   = "OK"
	CheckWarn = "WARN"
	CheckFail = "FAIL"
)

// CheckItem is one line of pgsync check.
type CheckItem struct {
	Item   string `json:"item"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Checks are the items of a preflight.
type Checks []CheckItem

func (c *Checks) add(item, status, detail, fix string) {
	*c = append(*c, CheckItem{Item: item, Status: status, Detail: detail, Fix: fix})
}

// Failed returns the items that failed.
func (c Checks) Failed() []CheckItem {
	var out []CheckItem
	for _, it := range c {
		if it.Status == CheckFail {
			out = append(out, it)
		}
	}
	return out
}

// FailedItems words failed checks as one line.
func FailedItems(failed []CheckItem) string {
	parts := make([]string, len(failed))
	for i, it := range failed {
		parts[i] = it.Item + ": " + it.Detail
		if it.Fix != "" {
			parts[i] += " (fix: " + it.Fix + ")"
		}
	}
	return strings.Join(parts, "; ")
}

// Preflight runs every check that needs no change on either server, on
// connections of its own (an unreachable server is one FAIL item).
// emptiness says whether to require empty target tables; bootstrap and
// add-tables judge that themselves (--force, an interrupted copy).
func Preflight(ctx context.Context, opts Options, emptiness bool) Checks {
	var c Checks
	src, err := pgconnect.Connect(ctx, "source", opts.SourceURL)
	if err != nil {
		c.add("source", CheckFail, OneLine(err.Error()), "check source.url and that the server listens")
	} else {
		defer src.Close(context.WithoutCancel(ctx))
	}
	tgt, err := pgconnect.Connect(ctx, "target", opts.TargetURL)
	if err != nil {
		c.add("target", CheckFail, OneLine(err.Error()), "check target.url and that the server listens")
	} else {
		defer tgt.Close(context.WithoutCancel(ctx))
	}
	var tables []catalog.Table
	if src != nil {
		tables = checkSource(ctx, &c, opts, src)
	}
	if tgt != nil {
		checkTarget(ctx, &c, opts, src, tgt, tables, emptiness)
	}
	return c
}

// checkSource adds the source's items and returns the selected tables.
func checkSource(ctx context.Context, c *Checks, opts Options, src *pgx.Conn) []catalog.Table {
	s, err := replication.ReadSourceSettings(ctx, src)
	if err != nil {
		c.add("source", CheckFail, OneLine(err.Error()), "")
		return nil
	}
	checkSourceSettings(c, s)
	checkHighAvailability(ctx, c, opts, src, s.Major)
	tables, err := catalog.Resolve(ctx, src, opts.Tables)
	if err != nil {
		c.add("tables", CheckFail, OneLine(err.Error()), "")
		return nil
	}
	if len(tables) == 0 {
		c.add("tables", CheckFail, "no source table matches job.tables "+strings.Join(opts.Tables, ", "), "fix job.tables")
		return nil
	}
	c.add("tables", CheckOK, fmt.Sprintf("%d selected", len(tables)), "")
	if unlogged, err := catalog.UnloggedMatches(ctx, src, opts.Tables); err == nil && len(unlogged) > 0 {
		names := make([]string, len(unlogged))
		for i, t := range unlogged {
			names[i] = t.String()
		}
		c.add("unlogged tables", CheckWarn, "skipped, logical replication cannot publish them: "+strings.Join(names, ", "), "ALTER TABLE ... SET LOGGED to include one")
	}
	checkReplicaIdentities(c, tables)
	checkPublishing(ctx, c, src, s.User, tables)
	if found := ruleDDLCapture(ctx, src, opts.DDLCapture); found.Item != "" {
		*c = append(*c, found)
	}
	var total int64
	for i := range tables {
		total += tables[i].SizeBytes
	}
	c.add("copy size", CheckOK, fmt.Sprintf("%s on disk in %d tables (indexes and TOAST included); free disk is not checked", humanize.IBytes(uint64(total)), len(tables)), "")
	return tables
}

// checkSourceSettings adds the items of the source's settings: version,
// wal_level, slots, WAL senders, REPLICATION, max_slot_wal_keep_size.
func checkSourceSettings(c *Checks, s replication.SourceSettings) {
	c.add("source", CheckOK, "PostgreSQL "+s.Version+", user "+s.User, "")
	if s.WALLevel == "logical" {
		c.add("wal_level", CheckOK, "logical", "")
	} else {
		c.add("wal_level", CheckFail, fmt.Sprintf("%q", s.WALLevel), "set wal_level = logical in postgresql.conf and restart the source")
	}
	if s.UsedSlots < s.MaxSlots {
		c.add("replication slots", CheckOK, fmt.Sprintf("%d of %d used", s.UsedSlots, s.MaxSlots), "")
	} else {
		c.add("replication slots", CheckFail, fmt.Sprintf("%d of %d used", s.UsedSlots, s.MaxSlots), "raise max_replication_slots and restart the source")
	}
	if s.UsedSenders < s.MaxSenders {
		c.add("wal senders", CheckOK, fmt.Sprintf("%d of %d used", s.UsedSenders, s.MaxSenders), "")
	} else {
		c.add("wal senders", CheckFail, fmt.Sprintf("%d of %d used", s.UsedSenders, s.MaxSenders), "raise max_wal_senders and restart the source")
	}
	if s.CanReplicate {
		c.add("REPLICATION", CheckOK, "user "+s.User+" may replicate", "")
	} else {
		c.add("REPLICATION", CheckFail, "user "+s.User+" lacks the REPLICATION attribute", "ALTER ROLE "+catalog.QuoteIdent(s.User)+" REPLICATION")
	}
	switch {
	case s.Major < 13:
		c.add("max_slot_wal_keep_size", CheckWarn, fmt.Sprintf("PostgreSQL %d has no such limit (13 added it): a slot left behind (a stopped run) keeps WAL until the source's disk is full", s.Major),
			"watch the slot's retained WAL with pgsync status while the job lasts, and drop the job (pgsync teardown) rather than leave it stopped")
	case s.MaxSlotWALKeepSizeMB < 0:
		c.add("max_slot_wal_keep_size", CheckWarn, "unlimited: a slot left behind (a stopped run) keeps WAL until the source's disk is full",
			"set max_slot_wal_keep_size (e.g. to a quarter of the free WAL disk) and reload")
	default:
		c.add("max_slot_wal_keep_size", CheckOK, humanize.IBytes(uint64(s.MaxSlotWALKeepSizeMB)<<20), "")
	}
}

// checkReplicaIdentities fails for tables with neither a primary key nor
// a replica identity: their updates and deletes cannot be replicated.
func checkReplicaIdentities(c *Checks, tables []catalog.Table) {
	var noIdentity, identityFixes []string
	for i := range tables {
		if t := &tables[i]; !t.Replicable() {
			noIdentity = append(noIdentity, t.String())
			identityFixes = append(identityFixes, "ALTER TABLE "+t.Ident()+" REPLICA IDENTITY FULL")
		}
	}
	if len(noIdentity) > 0 {
		c.add("replica identity", CheckFail, "no primary key or replica identity: "+strings.Join(noIdentity, ", "),
			strings.Join(identityFixes, "; ")+"; or add a primary key")
		return
	}
	c.add("replica identity", CheckOK, "every table has a primary key or replica identity", "")
}

// checkPublishing adds whether user may read every table and publish
// them: CREATE on the database, and ownership of each table.
func checkPublishing(ctx context.Context, c *Checks, src *pgx.Conn, user string, tables []catalog.Table) {
	var noSelect, notOwned []string
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
		c.add("table privileges", CheckFail, OneLine(err.Error()), "")
	}
	if len(noSelect) > 0 {
		c.add("SELECT", CheckFail, "user "+user+" cannot read "+strings.Join(noSelect, ", "), "GRANT SELECT ON <table> TO "+catalog.QuoteIdent(user))
	} else if err == nil {
		c.add("SELECT", CheckOK, "every table is readable", "")
	}
	var canPublish bool
	if qerr := src.QueryRow(ctx, "SELECT has_database_privilege(current_database(), 'CREATE')").Scan(&canPublish); qerr != nil {
		c.add("publication", CheckFail, OneLine(qerr.Error()), "")
	} else if !canPublish {
		c.add("publication", CheckFail, "user "+user+" lacks CREATE on the source database, which CREATE PUBLICATION needs",
			"GRANT CREATE ON DATABASE <source database> TO "+catalog.QuoteIdent(user))
	}
	if len(notOwned) > 0 {
		c.add("publication", CheckFail, "a publication takes only tables its creator owns; user "+user+" does not own "+strings.Join(notOwned, ", "),
			"run as the tables' owner, or GRANT <owner> TO "+catalog.QuoteIdent(user))
	} else if err == nil && canPublish {
		c.add("publication", CheckOK, "user "+user+" may create the publication and owns every table", "")
	}
}

// checkTarget adds the target's items; src is nil when the source is
// unreachable, and then the tables are not judged. emptiness: the job's
// existing target tables must be empty, and the target must hold no
// large object with a source one's OID (check; bootstrap and add-tables
// judge those themselves, by --force and what they copied).
func checkTarget(ctx context.Context, c *Checks, opts Options, src, tgt *pgx.Conn, tables []catalog.Table, emptiness bool) {
	if !checkTargetSession(ctx, c, opts, tgt) || src == nil || len(tables) == 0 {
		return
	}
	var create []*catalog.Table
	existing := 0
	inspected, err := inspectTargetTables(ctx, tgt, tablePtrs(tables), func(*catalog.Table) bool { return emptiness })
	for i := range tables {
		t, tt := &tables[i], inspected[i]
		*c = append(*c, targetTableFinding(t, tt, err))
		switch {
		case err != nil:
		case !tt.exists:
			create = append(create, t)
		default:
			existing++
		}
	}
	checkStatementTriggers(ctx, c, tgt, tables)
	_, ext := ruleExtensions(ctx, src, tgt)
	*c = append(*c, ext)
	if _, lo := ruleLargeObjects(ctx, src, tgt, emptiness); lo.Item != "" {
		*c = append(*c, lo)
	}
	ch, err := chooseSchema(ctx, schemaInput{opts: opts, src: src, tgt: tgt, tables: tables, create: create, existing: existing,
		publication: opts.Slot})
	if err != nil {
		c.add(itemSchema, CheckFail, OneLine(err.Error()), "")
		return
	}
	*c = append(*c, ch.findings...)
}

// checkTargetSession adds the items of the target's session: version,
// the right to create schema pgsync and temporary tables, to set
// session_replication_role, and the job's progress. false: the target
// could not be read.
func checkTargetSession(ctx context.Context, c *Checks, opts Options, tgt *pgx.Conn) bool {
	var version, user string
	var canCreate, canTemp bool
	if err := tgt.QueryRow(ctx, `SELECT current_setting('server_version'), current_user::text,
       has_database_privilege(current_database(), 'CREATE') OR to_regnamespace('pgsync') IS NOT NULL,
       has_database_privilege(current_database(), 'TEMPORARY')`).Scan(&version, &user, &canCreate, &canTemp); err != nil {
		c.add("target", CheckFail, OneLine(err.Error()), "")
		return false
	}
	c.add("target", CheckOK, "PostgreSQL "+version+", user "+user, "")
	if canCreate {
		c.add("pgsync schema", CheckOK, "pgsync.progress can be created or exists", "")
	} else {
		c.add("pgsync schema", CheckFail, "user "+user+" cannot create schema pgsync", "GRANT CREATE ON DATABASE <target database> TO "+catalog.QuoteIdent(user))
	}
	if !canTemp {
		// apply/staged.go: rows whose values reach 4 MiB go through a
		// temporary table; without it, such a row stops run.
		c.add("temporary tables", CheckWarn, "user "+user+" cannot create temporary tables: run stops at a row whose values reach 4 MiB",
			"GRANT TEMPORARY ON DATABASE <target database> TO "+catalog.QuoteIdent(user))
	}
	if err := pgconnect.ReplicaSession(ctx, tgt); err != nil {
		fix := ""
		if errors.Is(err, pgconnect.ErrReplicaRole) {
			fix = "GRANT SET ON PARAMETER session_replication_role TO " + catalog.QuoteIdent(user) + " (PostgreSQL 15+), or a superuser"
		}
		c.add("session_replication_role", CheckFail, OneLine(err.Error()), fix)
	} else {
		c.add("session_replication_role", CheckOK, "the target session can set replica", "")
	}
	if prog, err := ledger.ReadProgress(ctx, tgt, opts.Job); err == nil {
		c.add("job", CheckWarn, fmt.Sprintf("job %s already has progress on the target (state %s)", opts.Job, prog.State),
			"pgsync run continues it; bootstrap --force starts it over")
	}
	return true
}

// checkStatementTriggers warns about statement-level INSERT, UPDATE or
// DELETE triggers that fire for replicas (ENABLE REPLICA or ALWAYS) on the
// job's target tables. PostgreSQL's apply worker fires row triggers only;
// pgsync applies rows with statements (a run, a COPY), each of which fires
// such a trigger once. TRUNCATE's fire in both.
func checkStatementTriggers(ctx context.Context, c *Checks, tgt *pgx.Conn, tables []catalog.Table) {
	rows, err := tgt.Query(ctx, `SELECT tgrelid::regclass::text || ': ' || tgname
FROM pg_trigger
WHERE NOT tgisinternal AND tgenabled IN ('R', 'A')
  AND tgtype & 1 = 0          -- FOR EACH STATEMENT
  AND tgtype & (4 | 8 | 16) <> 0 -- INSERT, DELETE or UPDATE
  AND tgrelid = ANY (SELECT to_regclass(n) FROM unnest($1::text[]) n)
ORDER BY 1`, catalog.Idents(tables))
	if err != nil {
		c.add("statement triggers", CheckFail, OneLine(err.Error()), "")
		return
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		c.add("statement triggers", CheckFail, OneLine(err.Error()), "")
		return
	}
	if len(found) > 0 {
		c.add("statement triggers", CheckWarn, "enabled for replicas on the target, they fire once for each statement pgsync applies, where PostgreSQL's apply worker fires none: "+strings.Join(found, "; "),
			"make them row triggers, or ALTER TABLE ... ENABLE TRIGGER (not REPLICA or ALWAYS) if they are for the application's own writes")
	}
}

// OneLine joins a message's lines: every item and error is one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// checkHighAvailability adds the items of the source's standbys: a
// standby as the source (on a connection of its own to
// source.primary_url, when set), or whether the job's slot survives a
// failover of the source.
func checkHighAvailability(ctx context.Context, c *Checks, opts Options, src *pgx.Conn, major int) {
	st, err := replication.ReadStandbys(ctx, src, major)
	if err != nil {
		c.add(itemFailover, CheckFail, OneLine(err.Error()), "")
		return
	}
	in := standbySource{major: major, inRecovery: st.InRecovery, primarySet: opts.SourcePrimaryURL != ""}
	if in.inRecovery && in.primarySet && major >= 16 {
		primary, err := pgconnect.Connect(ctx, "source primary", opts.SourcePrimaryURL)
		if err != nil {
			c.add(itemStandbySource, CheckFail, OneLine(err.Error()), "check source.primary_url and that the server listens")
			return
		}
		defer primary.Close(context.WithoutCancel(ctx))
		if in.facts, err = replication.ReadStandbySource(ctx, src, primary); err != nil {
			c.add(itemStandbySource, CheckFail, OneLine(err.Error()), "")
			return
		}
	}
	if found := ruleStandbySource(in); found.Item != "" {
		*c = append(*c, found)
	}
	if !st.InRecovery {
		*c = append(*c, ruleFailover(major, st))
	}
}
