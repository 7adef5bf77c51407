package apply

import (
	"testing"

	"github.com/pgsync/pgsync/pgoutput"
)

// TestShortfall: the rows a statement did not change are a trigger's skips
// or missing rows, from what the statement counted (issue 16).
func TestShortfall(t *testing.T) {
	tests := []struct {
		name                       string
		op                         byte
		expect, affected, existing int64
		skipped, missing           int64
	}{
		{"insert skipped by a trigger", pgoutput.MsgInsert, 1, 0, -1, 1, 0},
		{"insert row set, some skipped", pgoutput.MsgInsert, 100, 60, -1, 40, 0},
		{"update without checks: missing", pgoutput.MsgUpdate, 1, 0, -1, 0, 1},
		{"delete row set without checks: missing", pgoutput.MsgDelete, 64, 63, -1, 0, 1},
		{"checked update: the row exists, skipped", pgoutput.MsgUpdate, 1, 0, 1, 1, 0},
		{"checked update: the row is missing", pgoutput.MsgUpdate, 1, 0, 0, 0, 1},
		{"checked row set: one skipped, one missing", pgoutput.MsgUpdate, 10, 8, 9, 1, 1},
		{"checked delete row set: all skipped", pgoutput.MsgDelete, 5, 0, 5, 5, 0},
	}
	for _, tt := range tests {
		skipped, missing := shortfall(tt.op, tt.expect, tt.affected, tt.existing)
		if skipped != tt.skipped || missing != tt.missing {
			t.Errorf("%s: skipped %d, missing %d; want %d, %d", tt.name, skipped, missing, tt.skipped, tt.missing)
		}
	}
}

// TestMayTriggerSkip: which triggers (tgtype bits) make an operation's
// statements count the rows they find.
func TestMayTriggerSkip(t *testing.T) {
	const row, before, insert = 1, 2, 4
	tests := []struct {
		op          byte
		ops         int
		partitioned bool
		want        bool
	}{
		{pgoutput.MsgUpdate, row | before | tgUpdate, false, true},
		{pgoutput.MsgUpdate, row | before | tgDelete, false, false},
		{pgoutput.MsgUpdate, row | before | tgDelete, true, true}, // a row moved to another partition
		{pgoutput.MsgDelete, row | before | tgDelete, false, true},
		{pgoutput.MsgDelete, row | before | tgUpdate | insert, true, false},
		{pgoutput.MsgInsert, row | before | insert, false, false}, // an INSERT needs no count
		{pgoutput.MsgUpdate, 0, true, false},
	}
	for _, tt := range tests {
		if got := mayTriggerSkip(tt.op, tt.ops, tt.partitioned); got != tt.want {
			t.Errorf("%s, tgtype bits %d, partitioned %v: %v, want %v", opName(tt.op), tt.ops, tt.partitioned, got, tt.want)
		}
	}
}

// TestCheckedStatements: on a table whose triggers may skip an UPDATE or
// DELETE, its statements also count the rows they find, from the same
// snapshot; INSERTs and the other operation are left as they are.
func TestCheckedStatements(t *testing.T) {
	rel := testRelation(t, false, 1, [2]string{"id", "bigint"}, [2]string{"v", "text"})
	rel.checked[rowOpIndex(pgoutput.MsgUpdate)] = true
	for _, tc := range []struct{ got, want string }{
		{updateSQL(rel, []int{1}, nil), `WITH pgsync_w AS (UPDATE "public"."t" SET "v" = $1 WHERE "id" = $2 RETURNING 1) SELECT (SELECT count(*) FROM pgsync_w), (SELECT count(*) FROM "public"."t" WHERE "id" = $2)`},
		{updateRowSetSQL(rel, []int{1}, 2), `WITH pgsync_w AS (UPDATE "public"."t" AS pgsync_t SET "v" = v.c0 FROM (VALUES ($1::text, $2::bigint), ($3::text, $4::bigint)) AS v(c0, c1) WHERE pgsync_t."id" = v.c1 RETURNING 1) SELECT (SELECT count(*) FROM pgsync_w), (SELECT count(*) FROM "public"."t" AS pgsync_t, (VALUES ($1::text, $2::bigint), ($3::text, $4::bigint)) AS v(c0, c1) WHERE pgsync_t."id" = v.c1)`},
		{deleteSQL(rel), `DELETE FROM "public"."t" WHERE "id" = $1`},
		{insertSQL(rel, 1, nil), `INSERT INTO "public"."t" ("id", "v") VALUES ($1, $2)`},
	} {
		if tc.got != tc.want {
			t.Errorf("\n%s\nwant\n%s", tc.got, tc.want)
		}
	}
	rel.checked[rowOpIndex(pgoutput.MsgDelete)] = true
	for _, tc := range []struct{ got, want string }{
		{deleteSQL(rel), `WITH pgsync_w AS (DELETE FROM "public"."t" WHERE "id" = $1 RETURNING 1) SELECT (SELECT count(*) FROM pgsync_w), (SELECT count(*) FROM "public"."t" WHERE "id" = $1)`},
		{deleteRowSetSQL(rel, 2), `WITH pgsync_w AS (DELETE FROM "public"."t" WHERE "id" IN ($1, $2) RETURNING 1) SELECT (SELECT count(*) FROM pgsync_w), (SELECT count(*) FROM "public"."t" WHERE "id" IN ($1, $2))`},
	} {
		if tc.got != tc.want {
			t.Errorf("\n%s\nwant\n%s", tc.got, tc.want)
		}
	}
}
