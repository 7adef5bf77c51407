// Package schemadump drives pg_dump and pg_restore for bootstrap: it dumps
// the source's schema into one custom-format archive, reads it through its
// table of contents, restores its pre-data section before the copy and
// builds its post-data objects one at a time after it, each recorded in the
// ledger. It knows nothing of jobs: the job package calls it.
package schemadump

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// pg_dump's custom-format archive lists its objects in a table of contents
// (pg_restore -l). Each line is
//
//	<dump id>; <catalog table oid> <object oid> <desc> <schema> <name> <owner>
//
// and a list made of such lines (pg_restore -L) restores those objects, in
// the list's order. pgsync reads only the dump id, the catalog identity and
// the desc from it: the object's table, name and kind come from the
// source's catalogs by that identity, so that no name with a space, a
// quote or a newline can be misread. The schema, name and owner fields are
// kept for log lines only.

// Entry is one line of an archive's table of contents.
type Entry struct {
	DumpID int
	// CatalogOID and OID identify the object on the source (0 0 for
	// comments, ACLs and other entries that belong to the one before).
	CatalogOID, OID uint32
	Desc            string // TABLE, INDEX, FK CONSTRAINT, ...
	Rest            string // schema, name and owner, as pg_restore printed them
}

// String is how log lines name the entry: its desc and the rest of its
// line but the owner.
func (e Entry) String() string {
	rest := e.Rest
	if i := strings.LastIndexByte(rest, ' '); i >= 0 {
		rest = rest[:i] // the owner, empty for an extension's comment
	}
	schema, name, ok := strings.Cut(rest, " ")
	if !ok {
		return strings.ToLower(e.Desc) + " " + rest
	}
	if schema == "-" {
		return strings.ToLower(e.Desc) + " " + name
	}
	return strings.ToLower(e.Desc) + " " + schema + "." + name
}

// ListLine is the entry's line in a list for pg_restore -L, which reads
// only the dump id before the semicolon.
func (e Entry) ListLine() string {
	return strconv.Itoa(e.DumpID) + "; " + strconv.FormatUint(uint64(e.CatalogOID), 10) + " " +
		strconv.FormatUint(uint64(e.OID), 10) + " " + e.Desc + " " + e.Rest
}

// tocDescs are the descs pg_dump writes (PostgreSQL 10 to 17). Several
// are prefixes of others ("INDEX", "INDEX ATTACH"), so the longest that
// matches wins.
var tocDescs = func() []string {
	d := []string{
		"ACCESS METHOD", "ACL", "AGGREGATE", "BLOB", "BLOB METADATA", "BLOBS", "CAST", "CHECK CONSTRAINT",
		"COLLATION", "COMMENT", "CONSTRAINT", "CONVERSION", "DATABASE", "DATABASE PROPERTIES", "DEFAULT",
		"DEFAULT ACL", "DOMAIN", "ENCODING", "EVENT TRIGGER", "EXTENSION", "FK CONSTRAINT",
		"FOREIGN DATA WRAPPER", "FOREIGN SERVER", "FOREIGN TABLE", "FUNCTION", "INDEX", "INDEX ATTACH",
		"LARGE OBJECT", "MATERIALIZED VIEW", "MATERIALIZED VIEW DATA", "OPERATOR", "OPERATOR CLASS",
		"OPERATOR FAMILY", "POLICY", "PROCEDURAL LANGUAGE", "PROCEDURE", "PUBLICATION", "PUBLICATION TABLE",
		"PUBLICATION TABLES IN SCHEMA", "ROW SECURITY", "RULE", "SCHEMA", "SEARCHPATH", "SECURITY LABEL",
		"SEQUENCE", "SEQUENCE OWNED BY", "SEQUENCE SET", "SERVER", "SHELL TYPE", "STATISTICS",
		"STATISTICS DATA", "STDSTRINGS", "SUBSCRIPTION", "SUBSCRIPTION TABLE", "TABLE", "TABLE ATTACH",
		"TABLE DATA", "TEXT SEARCH CONFIGURATION", "TEXT SEARCH DICTIONARY", "TEXT SEARCH PARSER",
		"TEXT SEARCH TEMPLATE", "TRANSFORM", "TRIGGER", "TYPE", "USER MAPPING", "VIEW",
	}
	sort.Slice(d, func(a, b int) bool { return len(d[a]) > len(d[b]) })
	return d
}()

// ParseTOC reads pg_restore -l's listing: comment lines (starting with a
// semicolon) and blank lines are skipped; any other line must be an
// entry.
func ParseTOC(listing string) ([]Entry, error) {
	var entries []Entry
	for n, line := range strings.Split(listing, "\n") {
		if line == "" || line[0] == ';' {
			continue
		}
		e, err := ParseTOCLine(line)
		if err != nil {
			return nil, fmt.Errorf("pg_restore -l line %d: %w", n+1, err)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// ParseTOCLine reads one entry of pg_restore -l's listing, or of a list
// recorded from one (Entry.ListLine).
func ParseTOCLine(line string) (Entry, error) {
	var e Entry
	id, rest, ok := strings.Cut(line, "; ")
	if !ok {
		return e, fmt.Errorf("%q is not a table-of-contents entry", line)
	}
	var err error
	if e.DumpID, err = strconv.Atoi(id); err != nil || e.DumpID <= 0 {
		return e, fmt.Errorf("%q: no dump id", line)
	}
	cat, rest, ok1 := strings.Cut(rest, " ")
	oid, rest, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 {
		return e, fmt.Errorf("%q: no catalog identity", line)
	}
	c, err1 := strconv.ParseUint(cat, 10, 32)
	o, err2 := strconv.ParseUint(oid, 10, 32)
	if err1 != nil || err2 != nil {
		return e, fmt.Errorf("%q: no catalog identity", line)
	}
	e.CatalogOID, e.OID = uint32(c), uint32(o)
	for _, d := range tocDescs {
		if strings.HasPrefix(rest, d+" ") || rest == d {
			e.Desc, e.Rest = d, strings.TrimPrefix(rest[len(d):], " ")
			return e, nil
		}
	}
	// A desc this list does not know (a newer pg_dump): its first word.
	e.Desc, e.Rest, _ = strings.Cut(rest, " ")
	return e, nil
}

// entryList writes entries as a list for pg_restore -L.
func entryList(entries []Entry) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(e.ListLine())
		b.WriteByte('\n')
	}
	return b.String()
}

// Catalog tables (pg_class.oid of each) that name an entry's object.
const (
	catPgClass      = 1259
	catPgConstraint = 2606
	catPgTrigger    = 2620
	catPgRewrite    = 2618
	catPgNamespace  = 2615
	catPgExtension  = 3079
	catPgPolicy     = 3256
)

// PostDataPhase orders post-data objects: keys and indexes first, in
// parallel; then the attachments of partitions' indexes to their
// parents'; then what needs them (foreign keys, triggers, rules,
// policies); last the comments, privileges and security labels, which
// belong to the entry before them and must not race it.
func PostDataPhase(desc string) int {
	switch desc {
	case "INDEX", "CONSTRAINT":
		return 0
	case "INDEX ATTACH", "PUBLICATION":
		// A publication before its tables and schemas (PUBLICATION
		// TABLE, phase 2): the entries of one phase are built in
		// parallel, and a table added to a publication not created yet
		// failed now and then.
		return 1
	case "COMMENT", "ACL", "SECURITY LABEL":
		return 3
	}
	return 2
}

// PostDataPhases is the number of phases of PostDataPhase.
const PostDataPhases = 4
