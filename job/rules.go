package job

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ddl"
	"github.com/pgsync/pgsync/largeobject"
	"github.com/pgsync/pgsync/replication"
	"github.com/pgsync/pgsync/schemadump"
)

// The rules that decide whether bootstrap and add-tables may write are
// written once, here, each returning what it found (item, status, detail,
// fix): check (Preflight) prints the findings, and the commands that
// write refuse on the same ones, with the same words (refusal), before
// they write anything. Two copies of a rule drift apart, and the operator
// learns it at the worst moment (issue 30: check said OK to a pg_dump
// older than the source, where bootstrap refused with the wrong advice).

// refusal is the error of a command that refuses on failed findings: the
// items, details and fixes pgsync check prints, wrapping the sentinel of
// the first one's rule (cmd words the remedy from it).
func refusal(failed ...CheckItem) error {
	return fmt.Errorf("%w: %s", ruleSentinel(failed[0].Item), FailedItems(failed))
}

// ruleSentinel is the sentinel error of the rule that reports item.
func ruleSentinel(item string) error {
	switch {
	case item == itemTypes || item == itemExtensions:
		return ErrMissingExtension
	case item == itemDefaultFunctions:
		return ErrMissingFunction
	case item == itemRoles:
		return ErrMissingRole
	case item == itemLargeObjects:
		return ErrLargeObjectsInTheWay
	case item == itemOlderTarget:
		return ErrOlderTarget
	case strings.HasPrefix(item, "table "):
		return ErrTargetTable
	}
	return ErrChecks
}

// The items of the rules that bootstrap and add-tables refuse on.
const (
	itemSchema           = "schema"
	itemExtensions       = "extensions"
	itemRoles            = "roles"
	itemTypes            = "types"
	itemDefaultFunctions = "default functions"
	itemLargeObjects     = "large objects"
	itemDDLCapture       = "ddl capture"
	itemOlderTarget      = "older target"
)

// pgDumpAdvice is the way out of what the built-in creator cannot make,
// when pg_dump is not used because the target has some of the job's
// tables (or job.pg_dump is off).
const pgDumpAdvice = "bootstrap into a target without the job's tables with a pg_dump as new as the source (job.pg_dump)"

// builtinLeavesOut is what the built-in creator does not make, which
// pg_dump's schema does.
const builtinLeavesOut = "views, materialized views, functions, triggers, rules, policies, comments, grants, replica identities, sequences not owned by a column, and the extensions themselves"

// failItem is the FAIL item of a rule that could not be evaluated.
func failItem(item string, err error) CheckItem {
	return CheckItem{Item: item, Status: CheckFail, Detail: OneLine(err.Error())}
}

// targetTableFinding is the finding for one table's target copy
// (inspectTargetTables).
func targetTableFinding(t *catalog.Table, tt targetTable, err error) CheckItem {
	item := "table " + t.String()
	switch {
	case err != nil:
		return failItem(item, err)
	case !tt.exists:
		return CheckItem{Item: item, Status: CheckOK, Detail: "missing on the target: bootstrap creates it"}
	case tt.problem != "":
		return CheckItem{Item: item, Status: CheckFail, Detail: tt.problem, Fix: tt.fix}
	case len(tt.warn) > 0:
		return CheckItem{Item: item, Status: CheckWarn, Detail: "present and compatible; " + strings.Join(tt.warn, "; ") + " (pgsync's sessions use TimeZone UTC)"}
	}
	return CheckItem{Item: item, Status: CheckOK, Detail: "present and compatible"}
}

// ruleExtensions fails for each source extension the target's server has
// not installed, and warns for each it has at another version only. exts
// are the source's extensions.
func ruleExtensions(ctx context.Context, src, tgt *pgx.Conn) (exts []schemadump.Extension, found CheckItem) {
	exts, err := schemadump.SourceExtensions(ctx, src)
	if err != nil {
		return nil, failItem(itemExtensions, err)
	}
	gaps, err := schemadump.GapsOf(ctx, tgt, exts)
	if err != nil {
		return exts, failItem(itemExtensions, err)
	}
	refused, other := gaps.Refused(), gaps.OtherVersion()
	switch {
	case len(refused) > 0:
		return exts, CheckItem{Item: itemExtensions, Status: CheckFail, Detail: strings.Join(refused, "; "),
			Fix: "install them on the target's server (no restart needed), then rerun pgsync check"}
	case len(other) > 0:
		return exts, CheckItem{Item: itemExtensions, Status: CheckWarn,
			Detail: "the target's server lacks the source's version of " + strings.Join(other, ", ") + ": bootstrap creates the server's default version"}
	}
	return exts, CheckItem{Item: itemExtensions, Status: CheckOK, Detail: fmt.Sprintf("the target's server has each of the source's %d extension(s) at its version", len(exts))}
}

// ruleRoles fails when the schema pg_dump would restore names roles the
// target lacks (but those its version cannot have), or roles its user
// cannot give objects to.
func ruleRoles(ctx context.Context, src, tgt *pgx.Conn, schemas []string, publication string) CheckItem {
	problem, err := schemadump.RoleProblem(ctx, src, tgt, schemas, publication)
	switch {
	case err != nil:
		return failItem(itemRoles, err)
	case problem != "":
		return CheckItem{Item: itemRoles, Status: CheckFail, Detail: problem,
			Fix: "pg_dumpall --roles-only --no-role-passwords -d <source> | psql -d <target> (docs/operations.md), or job.pg_dump = \"off\""}
	}
	return CheckItem{Item: itemRoles, Status: CheckOK, Detail: "the target has every role the schema names"}
}

// ruleLargeObjects says how many large objects the source has, and fails
// when the target lacks a role they name or, with clashes (a bootstrap
// without --force), has objects of its own with their OIDs. objs are the
// source's large objects.
func ruleLargeObjects(ctx context.Context, src, tgt *pgx.Conn, clashes bool) (objs []largeobject.Object, found CheckItem) {
	objs, err := largeobject.List(ctx, src)
	if err != nil {
		return nil, failItem(itemLargeObjects, err)
	}
	if len(objs) == 0 {
		return nil, CheckItem{}
	}
	problem, err := schemadump.TargetRoleProblem(ctx, tgt, largeobject.Roles(objs), "the large objects")
	switch {
	case err != nil:
		return objs, failItem(itemLargeObjects, err)
	case problem != "":
		return objs, CheckItem{Item: itemLargeObjects, Status: CheckFail, Detail: problem,
			Fix: "pg_dumpall --roles-only --no-role-passwords -d <source> | psql -d <target> (docs/operations.md)"}
	}
	n, bytes, err := largeobject.Summary(ctx, src)
	if err != nil {
		return objs, CheckItem{Item: itemLargeObjects, Status: CheckFail, Detail: OneLine(err.Error()),
			Fix: "the source's user must be able to read every large object (its owner, a grantee of SELECT, or a superuser)"}
	}
	if clashes {
		clash, err := largeObjectClashes(ctx, tgt, objs)
		switch {
		case err != nil:
			return objs, failItem(itemLargeObjects, err)
		case len(clash) > 0:
			return objs, CheckItem{Item: itemLargeObjects, Status: CheckFail,
				Detail: "the target has large objects of its own with the OIDs of source ones (" + strings.Join(clash, ", ") + ")",
				Fix:    "remove them (SELECT lo_unlink(oid)), or bootstrap --force to replace them"}
		}
	}
	return objs, CheckItem{Item: itemLargeObjects, Status: CheckOK, Detail: fmt.Sprintf("%d (%s): logical decoding does not carry them; bootstrap copies them, cutover copies those created or changed after, verify compares them", n, humanize.IBytes(uint64(bytes)))}
}

// largeObjectClashes names (up to 5) the target's large objects with the
// OID of one of objs.
func largeObjectClashes(ctx context.Context, tgt *pgx.Conn, objs []largeobject.Object) ([]string, error) {
	oids := make([]uint32, len(objs))
	for i, o := range objs {
		oids[i] = o.OID
	}
	var clash []string
	if err := tgt.QueryRow(ctx, `SELECT coalesce(array_agg(oid::text ORDER BY oid), '{}') FROM (
  SELECT oid FROM pg_largeobject_metadata WHERE oid = ANY ($1) ORDER BY oid LIMIT 5) x`, oids).Scan(&clash); err != nil {
		return nil, fmt.Errorf("look for the source's large objects on the target: %w", err)
	}
	return clash, nil
}

// schemaInput is what the schema rule judges: the job's tables, those the
// target lacks (create) and how many it has (existing).
type schemaInput struct {
	opts     Options
	src, tgt *pgx.Conn
	tables   []catalog.Table
	create   []*catalog.Table
	existing int
	// publication is the job's, which the target must not get.
	publication string
}

// schemaChoice is where bootstrap takes the target's schema from, and
// what the rule found.
type schemaChoice struct {
	// dump is pg_dump's scope, its archive not read yet; nil: the
	// built-in creator.
	dump *schemadump.Scope
	// why pg_dump is not used, when it is not.
	why      string
	findings Checks
}

// chooseSchema is the schema rule, for check and bootstrap alike: into a
// target without the job's tables the schema comes from a pg_dump as new
// as the source, else the built-in creator makes the missing tables. A
// pg_dump missing or older than the source is a WARN naming the pg_dump
// needed and what the built-in creator leaves out, and a FAIL when the
// built-in creator cannot make the tables (an extension's type, a
// default's function). What it could not read is a FAIL; only a cancelled
// ctx is an error.
func chooseSchema(ctx context.Context, in schemaInput) (schemaChoice, error) {
	var ch schemaChoice
	var pgDumpProblem string
	var srcMajor int
	switch {
	case in.opts.PgDump == schemadump.Off:
		ch.why = "job.pg_dump is off"
	case in.existing > 0:
		ch.why = fmt.Sprintf("the target already has %d of the job's tables (pg_dump's schema is used only for a target that has none)", in.existing)
	default:
		var err error
		if ch.dump, srcMajor, pgDumpProblem, err = findPgDump(ctx, in.opts.PgDump, in.src); err == nil && ch.dump != nil {
			ch.why, err = dumpScopeProblem(ctx, in, ch.dump)
		} else if err == nil {
			ch.why = pgDumpProblem
		}
		if err != nil {
			// Not a reason to do without pg_dump: the rule could not be
			// judged, and bootstrap must not guess.
			ch.dump = nil
			ch.findings = append(ch.findings, failItem(itemSchema, err))
			return ch, ctx.Err()
		}
	}
	if ch.why == "" {
		ch.findings.add(itemSchema, CheckOK, fmt.Sprintf("the target has none of the job's tables: bootstrap takes the schema from %s (pg_dump %d), %s", ch.dump.Path, ch.dump.Version, ch.dump), "")
		ch.findings = append(ch.findings, ruleRoles(ctx, in.src, in.tgt, ch.dump.Schemas, in.publication))
		if older := ruleOlderTarget(ctx, in, ch.dump, srcMajor); older.Item != "" {
			ch.findings = append(ch.findings, older)
		}
		return ch, ctx.Err()
	}
	ch.dump = nil
	// The built-in creator: what it cannot make fails, with the advice
	// that fits why pg_dump is not used.
	advice := pgDumpAdvice
	if pgDumpProblem != "" {
		advice = fmt.Sprintf("install pg_dump %d or newer and set job.pg_dump to its path: its schema creates them", srcMajor)
	}
	// The schema item comes first: it names the cause of what follows.
	builtin := ruleBuiltinCreator(ctx, in.src, in.tgt, in.create, advice)
	switch {
	case pgDumpProblem != "":
		status := CheckWarn
		if len(builtin.Failed()) > 0 {
			status = CheckFail
		}
		ch.findings.add(itemSchema, status, pgDumpProblem+"; the built-in creator makes the tables, their types, keys, indexes and constraints, and leaves out "+builtinLeavesOut,
			fmt.Sprintf("install pg_dump %d or newer (the source's major version or later) and set job.pg_dump to its path", srcMajor))
	case len(in.create) == 0:
		ch.findings.add(itemSchema, CheckOK, "the target has every table of the job: bootstrap creates none", "")
	default:
		ch.findings.add(itemSchema, CheckOK, fmt.Sprintf("the built-in creator makes the %d missing table(s), their types, keys, indexes and constraints, and leaves out %s: %s", len(in.create), builtinLeavesOut, ch.why), "")
	}
	ch.findings = append(ch.findings, builtin...)
	return ch, ctx.Err()
}

// ruleOlderTarget fails when the target's major version is older than the
// source's (a downgrade) and the target refuses some of pg_dump's schema,
// naming each object and the target's error (issue 32). The schema is
// dumped and each of its entries tried on the target in a transaction
// rolled back (schemadump.TrialSchema): what an older version lacks is
// not a list pgsync could keep true, the target's own answer is. An empty
// item: not a downgrade.
func ruleOlderTarget(ctx context.Context, in schemaInput, d *schemadump.Scope, srcMajor int) CheckItem {
	var tgtMajor int
	if err := in.tgt.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&tgtMajor); err != nil {
		return failItem(itemOlderTarget, fmt.Errorf("read the target's version: %w", err))
	}
	if tgtMajor >= srcMajor {
		return CheckItem{}
	}
	trial := *d // bootstrap dumps again into its own scope
	if err := trial.Dump(ctx, in.opts.SourceURL); err != nil {
		return failItem(itemOlderTarget, err)
	}
	if err := trial.ReadTOC(ctx, in.src, in.tgt, in.publication); err != nil {
		return failItem(itemOlderTarget, err)
	}
	refused, err := trial.TrialSchema(ctx, in.tgt)
	switch {
	case err != nil:
		return failItem(itemOlderTarget, err)
	case len(refused) > 0:
		return CheckItem{Item: itemOlderTarget, Status: CheckFail,
			Detail: fmt.Sprintf("PostgreSQL %d cannot hold %d object(s) of the PostgreSQL %d source's schema: %s", tgtMajor, len(refused), srcMajor, strings.Join(refused, "; ")),
			Fix:    "change or drop them on the source (or move to a target of PostgreSQL " + fmt.Sprint(srcMajor) + " or newer), then rerun pgsync check"}
	}
	return CheckItem{Item: itemOlderTarget, Status: CheckOK,
		Detail: fmt.Sprintf("PostgreSQL %d, older than the source (%d): it took each of the schema's %d entries, tried in a transaction rolled back", tgtMajor, srcMajor, len(trial.PreData)+len(trial.PostData))}
}

// findPgDump finds job.pg_dump and the pg_restore beside it, and says why
// they cannot take the schema of the source (problem): none found, or
// older than the source's major version (srcMajor). An error is the
// source's version unread, or a cancelled ctx.
func findPgDump(ctx context.Context, pgDump string, src *pgx.Conn) (d *schemadump.Scope, srcMajor int, problem string, err error) {
	if err := src.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&srcMajor); err != nil {
		return nil, 0, "", fmt.Errorf("read the source's version: %w", err)
	}
	path, err := exec.LookPath(pgDump)
	if err != nil {
		return nil, srcMajor, fmt.Sprintf("no pg_dump %q found", pgDump), nil
	}
	version, err := schemadump.Version(ctx, path)
	if err != nil {
		return nil, srcMajor, OneLine(err.Error()), ctx.Err()
	}
	if version < srcMajor {
		return nil, srcMajor, fmt.Sprintf("%s is pg_dump %d, older than the source (PostgreSQL %d), and cannot dump it", path, version, srcMajor), nil
	}
	restore, _, err := schemadump.RestoreProgram(ctx, path)
	if err != nil {
		return nil, srcMajor, OneLine(err.Error()), ctx.Err()
	}
	return &schemadump.Scope{Path: path, Version: version, Restore: restore}, srcMajor, "", nil
}

// dumpScopeProblem fills d's scope (schemas, unlogged tables, extensions)
// and says why pg_dump's schema cannot go into the target ("" when it
// can): the job takes only some tables of a schema, or the target holds
// objects the schema would create.
func dumpScopeProblem(ctx context.Context, in schemaInput, d *schemadump.Scope) (why string, err error) {
	if d.Schemas, d.Unlogged, why, err = schemadump.Schemas(ctx, in.src, in.tables); err != nil || why != "" {
		return why, err
	}
	if d.Schemas != nil {
		exts, err := schemadump.SourceExtensions(ctx, in.src)
		if err != nil {
			return "", err
		}
		for _, e := range exts {
			d.Extensions = append(d.Extensions, e.Name)
		}
	}
	return schemadump.TargetHoldsObjects(ctx, in.tgt, d.Schemas)
}

// ruleBuiltinCreator fails for the tables to create whose columns use a
// type or collation the target lacks and the built-in creator cannot make
// (an extension's type), or whose defaults call functions the target
// lacks (it makes no functions); advice is the pg_dump way out.
func ruleBuiltinCreator(ctx context.Context, src, tgt *pgx.Conn, create []*catalog.Table, advice string) Checks {
	var c Checks
	if len(create) == 0 {
		return c
	}
	if missing, err := catalog.UncreatableTypes(ctx, src, tgt, create); err != nil {
		c = append(c, failItem(itemTypes, err))
	} else if len(missing) > 0 {
		c.add(itemTypes, CheckFail, "columns use what the target lacks and the built-in creator does not make: "+strings.Join(missing, "; "),
			"CREATE EXTENSION (or the collation) on the target, or "+advice)
	}
	if missing, err := catalog.MissingDefaultFunctions(ctx, src, tgt, create); err != nil {
		c = append(c, failItem(itemDefaultFunctions, err))
	} else if len(missing) > 0 {
		c.add(itemDefaultFunctions, CheckFail, "column defaults call functions the target lacks: "+strings.Join(missing, "; "),
			"create them on the target (the built-in creator makes no functions), or "+advice)
	}
	return c
}

// ruleDDLCapture says, for job.ddl = "capture", whether the source's user
// can install the DDL capture (event triggers need a superuser, messages
// PostgreSQL 14), and what to grant when it cannot. An empty item when
// the job does not capture.
func ruleDDLCapture(ctx context.Context, src *pgx.Conn, capture bool) CheckItem {
	if !capture {
		return CheckItem{}
	}
	detail, problem, fix, err := ddl.Capability(ctx, src)
	switch {
	case err != nil:
		return failItem(itemDDLCapture, err)
	case problem != "":
		return CheckItem{Item: itemDDLCapture, Status: CheckFail, Detail: problem, Fix: fix}
	}
	return CheckItem{Item: itemDDLCapture, Status: CheckOK, Detail: detail}
}

// The items of the source's high-availability rules.
const (
	itemFailover      = "failover"
	itemStandbySource = "standby source"
)

// standbySlotsFix is what makes a standby keep a copy of the job's slot
// that is never behind the target: the primary's side, then the
// standby's, where only the standby can say whether it is done.
const standbySlotsFix = "give each standby a physical slot (primary_slot_name), name them on the source in synchronized_standby_slots " +
	"(ALTER SYSTEM SET synchronized_standby_slots = '<slot>,...'; SELECT pg_reload_conf()), and on each standby set " +
	"sync_replication_slots = on, hot_standby_feedback = on and dbname in primary_conninfo"

// ruleFailover says whether the job's slot survives a failover of the
// source (major) to one of its standbys. On 17 and later the slot is a
// failover slot (replication.createSlotSQL); a standby keeps a copy only
// when it synchronizes slots, which only the standby can tell, and the
// copy is never behind the target only when the standby's slot is in
// synchronized_standby_slots: otherwise the target can get ahead of the
// standby that becomes the primary, and hold changes the new primary
// never had. Before 17 a slot lives on its server alone.
func ruleFailover(major int, st replication.Standbys) CheckItem {
	var held, loose []string
	sync := map[string]bool{}
	for _, s := range st.SynchronizedSlots {
		sync[s] = true
	}
	for _, s := range st.Streaming {
		switch {
		case s.Slot == "":
			loose = append(loose, s.Name+" (no physical slot)")
		case !sync[s.Slot]:
			loose = append(loose, s.Name+" (slot "+s.Slot+")")
		default:
			held = append(held, s.Name+" (slot "+s.Slot+")")
		}
	}
	switch {
	case major < replication.FailoverSlotsMajor && len(st.Streaming) == 0:
		return CheckItem{Item: itemFailover, Status: CheckOK, Detail: fmt.Sprintf("no standby streams from the source; PostgreSQL %d has no failover slots (17 added them), so a standby would not get the job's slot", major)}
	case major < replication.FailoverSlotsMajor:
		return CheckItem{Item: itemFailover, Status: CheckWarn,
			Detail: fmt.Sprintf("standby %s streams from the source, and PostgreSQL %d has no failover slots (17 added them): after a failover the promoted standby has no slot of the job, which starts over (bootstrap --force), and the target may hold changes the new primary never received", strings.Join(loose, ", "), major),
			Fix:    "keep the source from failing over during the move (pause automatic failover), or move from a PostgreSQL 17 or newer source"}
	case len(st.MissingSlots) > 0:
		return CheckItem{Item: itemFailover, Status: CheckWarn,
			Detail: "synchronized_standby_slots names " + strings.Join(st.MissingSlots, ", ") + ", no physical slot of the source: the walsender of the job's failover slot sends nothing until it exists, and run applies nothing",
			Fix:    "create it for the standby that streams through it (pg_create_physical_replication_slot), or remove it from synchronized_standby_slots and reload"}
	case len(loose) > 0:
		return CheckItem{Item: itemFailover, Status: CheckWarn,
			Detail: "the slot is created with failover = true, but standby " + strings.Join(loose, ", ") + " is not held back by synchronized_standby_slots: the target can get ahead of it, and after a failover to it the target holds changes the new primary never had",
			Fix:    standbySlotsFix}
	case len(held) > 0:
		return CheckItem{Item: itemFailover, Status: CheckOK,
			Detail: "the slot is created with failover = true, and synchronized_standby_slots holds it back for standby " + strings.Join(held, ", ") +
				"; whether a standby keeps a copy only the standby can tell (sync_replication_slots = on, hot_standby_feedback = on, dbname in primary_conninfo; after bootstrap, SELECT slot_name, synced FROM pg_replication_slots there)"}
	}
	return CheckItem{Item: itemFailover, Status: CheckOK, Detail: "the slot is created with failover = true; no standby streams from the source, so none keeps a copy of it yet (" + standbySlotsFix + ")"}
}

// standbySource is what ruleStandbySource judges.
type standbySource struct {
	major      int  // the source's (source.url's) major
	inRecovery bool // source.url reaches a hot standby
	primarySet bool // source.primary_url is set
	facts      replication.StandbySource
}

// ruleStandbySource judges a hot standby as the source. PostgreSQL 16
// and later decode on a standby, and the slot's exported snapshot works
// there (docs/operations.md), so the slot, the copy and run read the
// standby; what a standby refuses (CREATE PUBLICATION and the DDL
// capture's objects are writes, txid_current() cannot run in recovery,
// and cutover's lock must hold the primary's writers) runs on the
// primary, source.primary_url. No finding for a primary without
// source.primary_url.
func ruleStandbySource(in standbySource) CheckItem {
	fail := func(detail, fix string) CheckItem {
		return CheckItem{Item: itemStandbySource, Status: CheckFail, Detail: detail, Fix: fix}
	}
	f := in.facts
	switch {
	case !in.inRecovery && !in.primarySet:
		return CheckItem{}
	case !in.inRecovery:
		return fail("source.primary_url is set, but source.url reaches a primary, not a hot standby",
			"remove source.primary_url, or point source.url at a standby of it")
	case in.major < 16:
		return fail(fmt.Sprintf("source.url reaches a hot standby of PostgreSQL %d, which cannot decode on a standby (16 added it)", in.major),
			"point source.url at the primary")
	case !in.primarySet:
		return fail("source.url reaches a hot standby: the publication, the DDL capture, and cutover's lock and position must run on its primary, which the job does not name",
			"set source.primary_url to the standby's primary, or point source.url at the primary")
	case f.PrimaryInRecovery:
		return fail("source.primary_url reaches a standby too", "point source.primary_url at the primary of source.url")
	case !f.SameSystem:
		return fail("source.primary_url is not the primary of source.url: their system identifiers differ", "point source.primary_url at the primary source.url replicates from")
	case f.PrimaryWALLevel != "logical":
		return fail(fmt.Sprintf("the primary's wal_level is %q: decoding on a standby needs logical on the primary", f.PrimaryWALLevel),
			"set wal_level = logical on the primary and restart it")
	case !f.HotStandbyFeedback:
		return fail("hot_standby_feedback is off on the standby: the primary would remove catalog rows the job's slot needs, and the standby invalidate the slot",
			"set hot_standby_feedback = on on the standby and reload")
	case f.PrimarySlotName == "":
		return CheckItem{Item: itemStandbySource, Status: CheckWarn,
			Detail: "the standby streams without a physical slot (primary_slot_name is empty): hot_standby_feedback holds the primary's cleanup back only while the standby is connected, so a disconnection can invalidate the job's slot",
			Fix:    "create a physical slot on the primary (pg_create_physical_replication_slot), set primary_slot_name on the standby and reload"}
	}
	return CheckItem{Item: itemStandbySource, Status: CheckOK,
		Detail: fmt.Sprintf("source.url is a hot standby of PostgreSQL %d (physical slot %s, hot_standby_feedback on): the slot, its snapshot, the copy and run read it; the publication, the DDL capture, and cutover's lock and position are the primary's (source.primary_url)", in.major, f.PrimarySlotName)}
}
