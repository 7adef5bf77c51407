package catalog

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// definitionsSQL reads the definitions of the tables that sel selects, a
// query of two columns (a pg_class oid and its rank in the result): one
// row per column of each table (one row with empty column fields for a
// table without any), by rank then column number. Resolve and LookupAll
// read every table of a job in this one query (issue 33).
func definitionsSQL(sel string) string {
	// OFFSET 0 keeps tbl a subquery of its own, so that its per-table
	// subqueries (size, keys, partition) run once per table, not once
	// per column row.
	return `WITH sel(oid, ord) AS (` + sel + `),
tbl AS (
  SELECT sel.ord, c.oid, n.nspname::text AS nspname, c.relname::text AS relname, c.relreplident::text AS ident,
         pg_total_relation_size(c.oid) AS size,
         coalesce((SELECT array_agg(k.attname::text ORDER BY x.n)
                   FROM pg_index i
                   CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS x(attnum, n)
                   JOIN pg_attribute k ON k.attrelid = i.indrelid AND k.attnum = x.attnum
                   WHERE i.indrelid = c.oid AND i.indisprimary), '{}') AS pk,
         EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisreplident) AS identidx,
         coalesce((SELECT pn.nspname || '|' || p.relname || '|' || pg_get_expr(c.relpartbound, c.oid)
                   FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent JOIN pg_namespace pn ON pn.oid = p.relnamespace
                   WHERE h.inhrelid = c.oid AND c.relispartition), '') AS partof,
         CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) ELSE '' END AS partkey
  FROM sel JOIN pg_class c ON c.oid = sel.oid JOIN pg_namespace n ON n.oid = c.relnamespace
  OFFSET 0)
SELECT t.ord, t.nspname, t.relname, t.ident, t.size, t.pk, t.identidx, t.partof, t.partkey,
       coalesce(a.attname::text, ''), coalesce(format_type(a.atttypid, a.atttypmod), ''), coalesce(format_type(a.atttypid, NULL), ''),
       coalesce(a.attidentity::text, ''), coalesce(a.attnotnull, false),
       coalesce((SELECT sq.seqrelid::regclass::text || '|' || format_type(sq.seqtypid, NULL) || '|' ||
                        format('INCREMENT BY %s MINVALUE %s MAXVALUE %s START WITH %s CACHE %s %s',
                               sq.seqincrement, sq.seqmin, sq.seqmax, sq.seqstart, sq.seqcache, CASE WHEN sq.seqcycle THEN 'CYCLE' ELSE 'NO CYCLE' END)
                 FROM pg_sequence sq
                 WHERE sq.seqrelid = pg_get_serial_sequence(format('%I.%I', t.nspname, t.relname), a.attname)::regclass),
                -- a sequence the column's default takes from without owning it
                (SELECT sq.seqrelid::regclass::text || '|' || format_type(sq.seqtypid, NULL) || '|' ||
                        format('INCREMENT BY %s MINVALUE %s MAXVALUE %s START WITH %s CACHE %s %s',
                               sq.seqincrement, sq.seqmin, sq.seqmax, sq.seqstart, sq.seqcache, CASE WHEN sq.seqcycle THEN 'CYCLE' ELSE 'NO CYCLE' END) || '|shared'
                 FROM pg_depend dep JOIN pg_sequence sq ON sq.seqrelid = dep.refobjid
                 WHERE dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid AND dep.refclassid = 'pg_class'::regclass
                 LIMIT 1), ''),
       coalesce(pg_get_expr(d.adbin, d.adrelid), ''), coalesce(a.attgenerated::text, '')
FROM tbl t
LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped -- a table may have no column
LEFT JOIN pg_attrdef d ON d.adrelid = t.oid AND d.adnum = a.attnum
ORDER BY t.ord, a.attnum`
}

// scanDefinitions reads definitionsSQL's rows into tables, in their order.
func scanDefinitions(rows pgx.Rows) ([]Table, error) {
	defer rows.Close()
	var tables []Table
	lastOrd := int64(-1)
	for rows.Next() {
		var ord int64
		var t Table
		var ident, partOf string
		var pk []string
		var c Column
		var identity, seq, def, gen string
		if err := rows.Scan(&ord, &t.Schema, &t.Name, &ident, &t.SizeBytes, &pk, &t.HasIdentityIndex, &partOf, &t.PartitionKey,
			&c.Name, &c.Type, &c.BaseType, &identity, &c.NotNull, &seq, &def, &gen); err != nil {
			return nil, fmt.Errorf("load columns of %s: %w", t.String(), err)
		}
		if ord != lastOrd {
			lastOrd = ord
			setTableFields(&t, ident, pk, partOf)
			tables = append(tables, t)
		}
		if c.Name != "" {
			setColumnFields(&c, identity, seq, def, gen)
			last := &tables[len(tables)-1]
			last.Columns = append(last.Columns, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return tables, nil
}

// setTableFields sets what definitionsSQL reads of a table once: its
// replica identity, primary key and partition.
func setTableFields(t *Table, ident string, pk []string, partOf string) {
	t.ReplicaIdentity = ident[0]
	if len(pk) > 0 {
		t.PrimaryKey = pk
	}
	if parts := strings.SplitN(partOf, "|", 3); len(parts) == 3 {
		t.PartitionOf = &Table{Schema: parts[0], Name: parts[1]}
		t.PartitionBound = parts[2]
	}
}

// setColumnFields sets c's identity, sequence, default and generated
// expression from definitionsSQL's text columns.
func setColumnFields(c *Column, identity, seq, def, gen string) {
	if identity != "" {
		c.Identity = identity[0]
		c.IdentityAlways = c.Identity == 'a'
	}
	if parts := strings.SplitN(seq, "|", 4); len(parts) >= 3 {
		c.Sequence, c.SequenceType, c.SequenceOptions = parts[0], parts[1], parts[2]
		c.SequenceShared = len(parts) == 4
	}
	switch {
	case gen == "s":
		c.Generated = def
	case def == "":
	case !strings.Contains(def, "nextval("), c.Sequence != "" && c.Identity == 0:
		// A default that takes from a sequence (the column's own, or
		// one it shares) is portable: CreateTableSQL creates it.
		c.Default = def
	}
}
