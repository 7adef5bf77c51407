package ddl

import (
	"errors"
	"fmt"
	"strings"
)

// Statements whose effect depends on where they run (issue 31, point 4).
// A table rewrite is not decoded: ALTER TABLE ... ADD COLUMN with a
// volatile default (clock_timestamp(), gen_random_uuid(), nextval(), an
// identity) gives each existing row a value of its own, one with a stable
// default (now(), CURRENT_TIMESTAMP) gives them all the source's
// transaction time, and ALTER COLUMN ... TYPE ... USING an expression
// that is not immutable computes each row's new value there: no change
// message carries any of these values, and the same statement run on the
// target computes other ones.
//
// The capture function finds them on the source, where the catalog says
// what was added: a table_rewrite event trigger notes each rewritten
// table and why (pg_event_trigger_table_rewrite_reason(): 2 a column's
// default, 4 a column's type), and ddl_command_end, for each ALTER TABLE
// of the job's schemas, looks for
//
//   - columns whose pg_attribute row the transaction wrote (xmin), that
//     the table was rewritten for (reason 2) or that store a value for
//     older rows (atthasmissing, the fast default), and whose default
//     calls a function that is not immutable (pg_proc.provolatile, found
//     by the oids in its node tree), or is CURRENT_TIMESTAMP and its kin
//     (SQLValueFunction) or an identity;
//   - a type change that rewrote the table (reason 4) when the statement's
//     text holds USING and calls a function of a name pg_proc has only
//     with volatilities other than immutable (a name with an immutable
//     overload, numeric(...) say, is a cast or a typmod far more often
//     than money's stable numeric(money)), or CURRENT_TIMESTAMP and its kin:
//     the USING expression is in no catalog, so its text is read, and
//     read conservatively (a name in a string counts).
//
// Each column is reported once per transaction. What was found is emitted
// as a record of its own right after the statement's (Record.Elsewhere),
// and run refuses that record: the statement has then run in the target
// transaction, which the refusal rolls back. Skipping the record (run
// --skip-ddl) lets the statement run on the target with the target's
// values, which the operator then replaces with the source's
// (docs/operations.md says how). Carrying the values instead, by copying
// the table under a snapshot at the statement's position, is not built.

// elsewhereSQL is the part of the capture function (functionSQL) that runs
// for each ALTER TABLE command obj of the job's schemas at
// ddl_command_end; %[1]s is the job.
const elsewhereSQL = `          rewrites := coalesce(current_setting('pgsync.ddl_rewrites_%[1]s', true), '');
          SELECT coalesce(bit_or(split_part(x, ':', 2)::int), 0) INTO reason
            FROM unnest(string_to_array(rewrites, ',')) AS x
           WHERE x <> '' AND (split_part(x, ':', 1)::oid = obj.objid
                 OR split_part(x, ':', 1)::oid IN (SELECT relid FROM pg_partition_tree(obj.objid)));
          reported := coalesce(nullif(current_setting('pgsync.ddl_elsewhere_%[1]s', true), ''), ',');
          cols := NULL;
          SELECT array_agg(a.attname::text ORDER BY a.attnum) INTO cols
            FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
           WHERE a.attrelid = obj.objid AND a.attnum > 0 AND NOT a.attisdropped
             AND a.xmin = pg_current_xact_id()::xid
             AND position(',' || obj.objid::text || '.' || a.attname || ',' IN reported) = 0
             AND ((reason & 2) <> 0 OR a.atthasmissing)
             AND (a.attidentity <> '' OR d.adbin::text ~ '\{(SQLVALUEFUNCTION|NEXTVALUEEXPR) ' OR EXISTS (
                  SELECT 1 FROM regexp_matches(d.adbin::text, ':(?:func|opfunc)id (\d+)', 'g') AS m(id)
                  JOIN pg_proc p ON p.oid = m.id[1]::oid WHERE p.provolatile <> 'i'));
          IF cols IS NOT NULL THEN
            elsewhere := elsewhere || json_build_object('table', obj.object_identity, 'columns', cols, 'why', 'default');
            reported := reported || (SELECT string_agg(obj.objid::text || '.' || c, ',') FROM unnest(cols) AS c) || ',';
          END IF;
          IF (reason & 4) <> 0 AND current_query() ~* '\mUSING\M' AND (current_query() ~* '` + sqlValueWords + `'
             OR EXISTS (SELECT 1 FROM regexp_matches(current_query(), '([A-Za-z_][A-Za-z_0-9$]*)\s*\(', 'g') AS m(f)
                        JOIN pg_proc p ON p.proname = lower(m.f[1]) WHERE p.provolatile <> 'i'
                         AND NOT EXISTS (SELECT 1 FROM pg_proc i WHERE i.proname = p.proname AND i.provolatile = 'i'))) THEN
            cols := NULL;
            SELECT array_agg(a.attname::text ORDER BY a.attnum) INTO cols FROM pg_attribute a
             WHERE a.attrelid = obj.objid AND a.attnum > 0 AND NOT a.attisdropped AND a.xmin = pg_current_xact_id()::xid
               AND position(',' || obj.objid::text || '.' || a.attname || ',' IN reported) = 0;
            elsewhere := elsewhere || json_build_object('table', obj.object_identity, 'columns', coalesce(cols, '{}'), 'why', 'using');
            reported := reported || coalesce((SELECT string_agg(obj.objid::text || '.' || c, ',') FROM unnest(cols) AS c) || ',', '');
          END IF;
          PERFORM set_config('pgsync.ddl_elsewhere_%[1]s', reported, true);`

// sqlValueWords matches, as a PostgreSQL regular expression, the keywords
// that read the session or the clock without parentheses.
const sqlValueWords = `\m(current_timestamp|current_date|current_time|localtime|localtimestamp|current_user|session_user|current_role|current_schema|current_catalog|user)\M`

// Elsewhere is what the capture found of a statement whose values for a
// table's existing rows depend on where it runs.
type Elsewhere struct {
	// Table is the table's identity (schema.name, quoted as needed).
	Table string `json:"table"`
	// Columns are the columns whose values the statement computed.
	Columns []string `json:"columns"`
	// Why is "default" (a column added with a default that is not
	// immutable, or an identity) or "using" (a type changed with a USING
	// expression that is not immutable).
	Why string `json:"why"`
}

// ErrElsewhere is the cause of an ElsewhereError, for errors.Is.
var ErrElsewhere = errors.New("its values for the existing rows depend on where it runs")

// ElsewhereError refuses a record whose Elsewhere is set.
type ElsewhereError struct {
	Found []Elsewhere
}

// Error names each table and its columns, and what computed them.
func (e *ElsewhereError) Error() string {
	parts := make([]string, len(e.Found))
	for i, f := range e.Found {
		what := "a default that is not immutable"
		if f.Why == "using" {
			what = "a USING expression that is not immutable"
		}
		cols := "its columns"
		if len(f.Columns) > 0 {
			cols = "column " + strings.Join(f.Columns, ", ")
		}
		parts[i] = fmt.Sprintf("%s of table %s computed by %s for the existing rows", cols, f.Table, what)
	}
	return fmt.Sprintf("%s: %v, values no change message carries and the target would compute otherwise", strings.Join(parts, "; "), ErrElsewhere)
}

// Is makes errors.Is(err, ErrElsewhere) true.
func (e *ElsewhereError) Is(target error) bool { return target == ErrElsewhere }

// Refused returns the error run stops with for r, nil when the capture
// found nothing that depends on where it runs.
func (r Record) Refused() error {
	if len(r.Elsewhere) == 0 {
		return nil
	}
	return &ElsewhereError{Found: r.Elsewhere}
}
