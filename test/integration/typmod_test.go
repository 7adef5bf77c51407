//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgsync/pgsync/catalog"
)

// typmodColumns are the columns of tm after its key: one of each type that
// takes a modifier, and an array of each (issue 16).
var typmodColumns = []string{
	"b bit(8)", "vb varbit(5)", "c char(3)", "vc varchar(4)", "n numeric(5,2)",
	"t time(0)", "tz timetz(2)", "ts timestamp(3)", "tstz timestamptz(3)", "iv interval day to second(2)",
	"ba bit(8)[]", "vba varbit(5)[]", "ca char(3)[]", "vca varchar(4)[]", "na numeric(5,2)[]",
	"ta time(0)[]", "tza timetz(2)[]", "tsa timestamp(3)[]", "tstza timestamptz(3)[]", "iva interval day to second(2)[]",
}

// typmodSourceSQL creates tm, tmrow(g, v) (row g of tm in version v: every
// value at the edge of its column's modifier) and three tables keyed by
// bit(8) and char(3) columns.
func typmodSourceSQL() string {
	return `CREATE TABLE tm (id int PRIMARY KEY, ` + strings.Join(typmodColumns, ", ") + `);
CREATE FUNCTION tmrow(g int, v int) RETURNS tm LANGUAGE sql AS $$
SELECT g, s.b, s.vb, s.c, s.vc, s.n, s.t, s.tz, s.ts, s.tstz, s.iv,
  ARRAY[s.b, B'10101010', NULL]::bit(8)[], ARRAY[s.vb, B'1', B'', NULL]::varbit(5)[],
  ARRAY[s.c, 'ab ', 'abc', NULL]::char(3)[], ARRAY[s.vc, 'wxyz', '', NULL]::varchar(4)[],
  ARRAY[s.n, 999.99, -999.99, NULL]::numeric(5,2)[], ARRAY[s.t, '23:59:59', NULL]::time(0)[],
  ARRAY[s.tz, '00:00:00.01-12', NULL]::timetz(2)[], ARRAY[s.ts, '1999-12-31 23:59:59.999', NULL]::timestamp(3)[],
  ARRAY[s.tstz, '1999-12-31 23:59:59.999+14', NULL]::timestamptz(3)[],
  ARRAY[s.iv, '-1 day -00:00:00.01', NULL]::interval day to second(2)[]
FROM (SELECT ((g + v) % 256)::bit(8) AS b, ((g + v) % 32)::bit(5)::varbit(5) AS vb,
  (ARRAY['ab ', 'abc', 'a', 'xyz'])[(g + v) % 4 + 1]::char(3) AS c, right('abcd' || (g + v), 4)::varchar(4) AS vc,
  (CASE (g + v) % 3 WHEN 0 THEN 999.99 WHEN 1 THEN -999.99 ELSE (g + v) % 1000 + 0.01 END)::numeric(5,2) AS n,
  (time '23:59:59' - (g + v) * interval '1 second')::time(0) AS t,
  ('23:59:' || lpad(((g + v) % 60)::text, 2, '0') || '.99+05:30')::timetz(2) AS tz,
  (timestamp '2024-02-29 23:59:59.999' + (g + v) * interval '1 day')::timestamp(3) AS ts,
  (timestamptz '2024-02-29 23:59:59.999+00' + (g + v) * interval '1 hour')::timestamptz(3) AS tstz,
  ((g + v) * interval '1 day' + interval '23:59:59.99')::interval day to second(2) AS iv) s
$$;
INSERT INTO tm SELECT r.* FROM generate_series(1, 300) g, tmrow(g, 0) r;
CREATE TABLE kb (k bit(8) PRIMARY KEY, v int);
INSERT INTO kb SELECT g::bit(8), 0 FROM generate_series(0, 127) g UNION ALL SELECT B'10101010', 0;
CREATE TABLE kc (k char(3) PRIMARY KEY, v int);
INSERT INTO kc SELECT k::char(3), 0 FROM (SELECT left(md5(g::text), 1 + g % 3) FROM generate_series(1, 600) g
  UNION SELECT unnest(ARRAY['a', 'ab', 'abc'])) s(k) ON CONFLICT DO NOTHING;
CREATE TABLE kbc (b bit(8), c char(3), v int, PRIMARY KEY (b, c));
INSERT INTO kbc SELECT g::bit(8), c, 0 FROM generate_series(0, 127) g, unnest(ARRAY['a', 'ab ', 'abc']) c;`
}

// TestTypmodValuesApplyUnchanged (issue 16): values at the edge of their
// columns' type modifiers, and keys of types whose bare name has a
// modifier (bit is bit(1), character is character(1)), go through every
// apply path unchanged: COPY, multi-row INSERT, single and batched UPDATE,
// key changes, single and batched DELETE. A cast to bit or character in a
// batched statement cut the values (or refused them) and matched keys cut
// to their first character.
func TestTypmodValuesApplyUnchanged(t *testing.T) {
	e := newEnv(t, typmodSourceSQL(), "")
	e.mustPgsync("bootstrap")
	// A statement trigger on the target records the shape of each
	// statement that wrote, so that the test knows every path ran.
	e.tgtExec(`CREATE TABLE writes (tbl text, op text, shape text);
CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE q text := current_query();
BEGIN
  INSERT INTO writes VALUES (TG_TABLE_NAME, TG_OP,
    CASE WHEN q LIKE 'COPY%' THEN 'copy' WHEN q LIKE '%), (%' OR q LIKE '% IN ($%, $%' THEN 'rows' ELSE 'one' END);
  RETURN NULL;
END $$;`)
	for _, table := range []string{"tm", "kb", "kc", "kbc"} {
		e.tgtExec(fmt.Sprintf(`CREATE TRIGGER log_write AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT EXECUTE FUNCTION log_write();
ALTER TABLE %s ENABLE ALWAYS TRIGGER log_write;`, table, table))
	}

	var names []string
	for _, c := range typmodColumns {
		names = append(names, strings.Fields(c)[0])
	}
	cols := strings.Join(names, ", ")
	setAll := func(version int, where string) string {
		return fmt.Sprintf("UPDATE tm SET (%s) = (SELECT %s FROM tmrow(tm.id, %d)) WHERE %s", cols, cols, version, where)
	}
	// COPY (a run of 400 INSERTs), then a multi-row INSERT: the changes of
	// kb around the run of 10 end it (a run goes on across transactions).
	e.srcExec(`BEGIN;
INSERT INTO tm SELECT r.* FROM generate_series(301, 700) g, tmrow(g, 0) r;
COMMIT;`)
	e.srcExec(`BEGIN;
UPDATE kb SET v = -1 WHERE k = B'00000001';
INSERT INTO tm SELECT r.* FROM generate_series(701, 710) g, tmrow(g, 0) r;
UPDATE kb SET v = -1 WHERE k = B'00000010';
COMMIT;`)
	// Batched UPDATEs (runs of up to 64 rows), by an int, bit(8), char(3)
	// and (bit(8), char(3)) key.
	e.srcExec("BEGIN; " + setAll(1, "id <= 500") + "; UPDATE kb SET v = v + 1; UPDATE kc SET v = v + 1; UPDATE kbc SET v = v + 1; COMMIT;")
	// Single UPDATEs: each alone in its run.
	e.srcExec("BEGIN; " + setAll(2, "id = 600") + "; UPDATE kb SET v = 10 WHERE k = B'10101010'; " +
		setAll(3, "id = 601") + "; UPDATE kc SET v = 10 WHERE k = 'abc'; UPDATE kbc SET v = 10 WHERE b = B'00000011' AND c = 'ab'; COMMIT;")
	// UPDATEs that change the key.
	e.srcExec(fmt.Sprintf("UPDATE tm SET (id, %s) = (SELECT id + 1000, %s FROM tmrow(tm.id, 4)) WHERE id %% 10 = 0", cols, cols))
	e.srcExec(`BEGIN;
UPDATE tm SET id = id + 2000, b = ~b WHERE id % 10 = 1;
UPDATE kb SET k = k | B'10000000', v = 2 WHERE k::int % 5 = 0 AND k::int < 128;
UPDATE kc SET k = rtrim(k) || 'z', v = 3 WHERE length(k) < 3;
UPDATE kbc SET c = 'xy', v = 4 WHERE b::int % 7 = 0 AND c = 'abc';
COMMIT;`)
	// DELETEs by key, in runs and alone.
	e.srcExec(`BEGIN;
DELETE FROM tm WHERE id % 7 = 0;
DELETE FROM kb WHERE k::int % 3 = 0;
DELETE FROM kc WHERE k LIKE '%1%';
DELETE FROM kbc WHERE b::int % 3 = 0;
DELETE FROM tm WHERE id = 3; DELETE FROM kb WHERE k = B'00000100'; DELETE FROM kc WHERE k = 'abz';
DELETE FROM kbc WHERE b = B'00000001' AND c = 'a';
COMMIT;`)
	e.catchUp()
	e.mustVerify()

	const paths = "kb DELETE one, kb DELETE rows, kb UPDATE one, kb UPDATE rows, " +
		"kbc DELETE one, kbc DELETE rows, kbc UPDATE one, kbc UPDATE rows, " +
		"kc DELETE one, kc DELETE rows, kc UPDATE one, kc UPDATE rows, " +
		"tm DELETE one, tm DELETE rows, tm INSERT copy, tm INSERT rows, tm UPDATE one, tm UPDATE rows"
	if got := queryOne[string](t, e.tgt, "SELECT string_agg(DISTINCT tbl || ' ' || op || ' ' || shape, ', ' ORDER BY tbl || ' ' || op || ' ' || shape) FROM writes"); got != paths {
		t.Errorf("statements that wrote on the target:\n%s\nwant\n%s", got, paths)
	}

	// verify compares what it compares; here the values themselves, as
	// text, with the same time zone on both sides.
	e.srcExec("SET TimeZone = 'Asia/Kolkata'")
	e.tgtExec("SET TimeZone = 'Asia/Kolkata'")
	for _, table := range []string{"tm", "kb", "kc", "kbc"} {
		q := fmt.Sprintf("SELECT count(*) || E'\\n' || coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '') FROM %s x", table)
		want := queryOne[string](t, e.src, q)
		if got := queryOne[string](t, e.tgt, q); got != want {
			t.Errorf("%s on the target differs from the source:\n%s", table, firstDifference(want, got))
		}
	}
	// The edges are there: a character key shorter than its length, a
	// full bit(8) key.
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM kc WHERE k = 'abc' AND v = 10"); n != 1 {
		t.Errorf("kc row 'abc' with v = 10: %d rows", n)
	}
	if n := queryOne[int](t, e.tgt, "SELECT count(*) FROM kb WHERE k = B'10101010' AND v = 10"); n != 1 {
		t.Errorf("kb row 10101010 with v = 10: %d rows", n)
	}
}

// TestCastTypeMatchesServer: for every type of the server, the name
// catalog.CastType gives a column's base type (format_type(oid, NULL)) is
// the server's own name for the type without a modifier
// (format_type(oid, -1)), which takes any value of the type unchanged.
func TestCastTypeMatchesServer(t *testing.T) {
	c := mustConnect(t, adminURL(targetPort))
	defer c.Close(context.Background())
	rows, err := c.Query(context.Background(), "SELECT format_type(oid, NULL), format_type(oid, -1) FROM pg_type ORDER BY oid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var base, unconstrained string
		if err := rows.Scan(&base, &unconstrained); err != nil {
			t.Fatal(err)
		}
		if got := catalog.CastType(base); got != unconstrained {
			t.Errorf("CastType(%q) = %q, the server writes the type without a modifier %q", base, got, unconstrained)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("only %d types read", n)
	}
}

// firstDifference shows the first line where got differs from want.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\nsource %s\ntarget %s", i, wl, gl)
		}
	}
	return "(same)"
}
