package largeobject

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
)

// Sync brings dst's large objects in line with src's: each one dst lacks
// or holds with other content is copied, the owner, grants and comment of
// each one whose content is the same but whose metadata differs are set,
// and each one pgsync copied for job that src no longer has is removed
// (objects dst had of its own stay, and are reported). It returns what it
// found before it acted, and what it did: copied counts the objects
// copied and those whose metadata it set. dst's ledger is at the latest
// version (ledger.Ensure).
func Sync(ctx context.Context, src Querier, dst *pgx.Conn, job string) (found Comparison, copied, removed int, err error) {
	found, srcObjs, dstObjs, err := compare(ctx, src, dst)
	if err != nil || found.Identical() {
		return found, 0, 0, err
	}
	for _, d := range found.Differ {
		s, onSource := srcObjs[d.OID]
		t, onTarget := dstObjs[d.OID]
		switch {
		case !onSource:
			gone, err := ledger.RemoveLargeObject(ctx, dst, job, d.OID)
			if err != nil {
				return found, copied, removed, fmt.Errorf("the source no longer has it: %w", err)
			}
			if gone {
				removed++
			}
			continue
		case !onTarget || d.Content:
			if _, err := Copy(ctx, src, dst, s, job); err != nil {
				return found, copied, removed, err
			}
		default:
			if err := pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error { return setMetadata(ctx, tx, s, t) }); err != nil {
				return found, copied, removed, fmt.Errorf("set the owner, grants and comment of large object %d: %w", d.OID, err)
			}
		}
		copied++
	}
	return found, copied, removed, nil
}

// setMetadata gives the target's large object want.OID want's owner,
// grants and comment, on tx; have is what it has now, and only what
// differs is changed. have's grants are revoked before the owner changes:
// a grantee who becomes the owner would otherwise lose the owner's own
// privileges to the revoke.
func setMetadata(ctx context.Context, tx Querier, want, have Object) error {
	oid := want.OID
	grantsDiffer := !slices.Equal(want.Grants, have.Grants)
	if grantsDiffer {
		for _, g := range have.Grants {
			if _, err := tx.Exec(ctx, fmt.Sprintf("REVOKE ALL ON LARGE OBJECT %d FROM %s", oid, g.Grantee)); err != nil {
				return fmt.Errorf("revoke from %s: %w", g.Grantee, err)
			}
		}
	}
	if want.Owner != have.Owner {
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER LARGE OBJECT %d OWNER TO %s", oid, catalog.QuoteIdent(want.Owner))); err != nil {
			return fmt.Errorf("owner %s: %w", want.Owner, err)
		}
	}
	if grantsDiffer {
		for _, g := range want.Grants {
			if _, err := tx.Exec(ctx, fmt.Sprintf("GRANT %s ON LARGE OBJECT %d TO %s", g.Privilege, oid, g.Grantee)); err != nil {
				return fmt.Errorf("grant %s to %s: %w", g.Privilege, g.Grantee, err)
			}
		}
	}
	if want.Comment != have.Comment {
		comment := "NULL"
		if want.Comment != "" {
			comment = catalog.QuoteLiteral(want.Comment)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("COMMENT ON LARGE OBJECT %d IS %s", oid, comment)); err != nil {
			return fmt.Errorf("comment: %w", err)
		}
	}
	return nil
}
