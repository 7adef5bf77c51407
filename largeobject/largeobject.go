// Package largeobject carries a database's large objects, which logical
// decoding does not: bootstrap copies them under the slot's snapshot,
// verify compares them by a hash of each, and cutover brings the target's
// in line with the locked source before it reports the target ready.
// Every read and write goes through lo_get and lo_put in chunks of
// ChunkBytes, so memory stays bounded whatever an object's size.
package largeobject

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgsync/pgsync/catalog"
	"github.com/pgsync/pgsync/ledger"
)

// ChunkBytes is how much of an object one lo_get or lo_put moves.
const ChunkBytes = 1 << 20

// Querier is a session or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Object is one large object's identity, owner and privileges.
type Object struct {
	OID   uint32
	Owner string
	// Grants are "SELECT" or "UPDATE" to a role ("PUBLIC" for all).
	Grants []Grant
}

// Grant is one privilege on a large object.
type Grant struct{ Privilege, Grantee string }

// List returns the large objects q sees, by OID.
func List(ctx context.Context, q Querier) ([]Object, error) {
	rows, err := q.Query(ctx, `SELECT m.oid, pg_get_userbyid(m.lomowner)::text,
  coalesce((SELECT array_agg(a.privilege_type || ' ' || CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END ORDER BY 1)
            FROM aclexplode(m.lomacl) a WHERE a.grantee <> m.lomowner), '{}')
FROM pg_largeobject_metadata m ORDER BY m.oid`)
	if err != nil {
		return nil, fmt.Errorf("list large objects: %w", err)
	}
	objs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Object, error) {
		var o Object
		var grants []string
		if err := r.Scan(&o.OID, &o.Owner, &grants); err != nil {
			return o, err
		}
		for _, g := range grants {
			priv, grantee, _ := strings.Cut(g, " ")
			o.Grants = append(o.Grants, Grant{Privilege: priv, Grantee: grantee})
		}
		return o, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list large objects: %w", err)
	}
	return objs, nil
}

// Summary counts the large objects q sees and their bytes (sizes read
// without reading the objects).
func Summary(ctx context.Context, q Querier) (count int64, bytes int64, err error) {
	err = q.QueryRow(ctx, `SELECT count(*), coalesce(sum(pg_catalog.lo_lseek64(pg_catalog.lo_open(oid, 262144), 0, 2)), 0)::bigint
FROM pg_largeobject_metadata`).Scan(&count, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("count large objects: %w", err)
	}
	return count, bytes, nil
}

// Roles returns the roles the large objects name (owners and grantees),
// which the target must have.
func Roles(objs []Object) []string {
	seen := map[string]bool{}
	for _, o := range objs {
		seen[o.Owner] = true
		for _, g := range o.Grants {
			if g.Grantee != "PUBLIC" {
				seen[strings.Trim(g.Grantee, `"`)] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for r := range seen {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// Hash is an object's size and a hash of its content: md5 of the md5s of
// its chunks, computed by the server, so that only 32 bytes a chunk cross
// the network.
type Hash struct {
	Bytes int64
	MD5   string
}

// HashOf hashes one large object on q (a session in a transaction, or
// one statement's).
func HashOf(ctx context.Context, q Querier, oid uint32) (Hash, error) {
	var h Hash
	var chunks string
	err := q.QueryRow(ctx, `SELECT s.size, coalesce(string_agg(md5(pg_catalog.lo_get($1, o, $2::int)), '' ORDER BY o), '')
FROM (SELECT pg_catalog.lo_lseek64(pg_catalog.lo_open($1, 262144), 0, 2) AS size) s
LEFT JOIN LATERAL generate_series(0, s.size - 1, $2) o ON true
GROUP BY s.size`, oid, int64(ChunkBytes)).Scan(&h.Bytes, &chunks)
	if err != nil {
		return h, fmt.Errorf("hash large object %d: %w", oid, err)
	}
	sum := md5.Sum([]byte(chunks))
	h.MD5 = hex.EncodeToString(sum[:])
	return h, nil
}

// Copy writes object o from src to dst in one dst transaction, which also
// records it as job's (pgsync.large_objects): created with its OID
// (replacing one dst has), its content chunk by chunk, its owner and its
// grants. It returns the bytes copied.
func Copy(ctx context.Context, src Querier, dst *pgx.Conn, o Object, job string) (int64, error) {
	var copied int64
	err := pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
		if err := ledger.RecordLargeObject(ctx, tx, job, o.OID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.lo_unlink($1) FROM pg_largeobject_metadata WHERE oid = $1`, o.OID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_catalog.lo_create($1)`, o.OID); err != nil {
			return err
		}
		buf := make([]byte, 0, ChunkBytes)
		for offset := int64(0); ; offset += ChunkBytes {
			buf = buf[:0]
			if err := src.QueryRow(ctx, `SELECT pg_catalog.lo_get($1, $2, $3::int)`, o.OID, offset, ChunkBytes).Scan(&buf); err != nil {
				return fmt.Errorf("read at %d: %w", offset, err)
			}
			if len(buf) > 0 {
				if _, err := tx.Exec(ctx, `SELECT pg_catalog.lo_put($1, $2, $3)`, o.OID, offset, buf); err != nil {
					return fmt.Errorf("write at %d: %w", offset, err)
				}
				copied += int64(len(buf))
			}
			if len(buf) < ChunkBytes {
				break
			}
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf("ALTER LARGE OBJECT %d OWNER TO %s", o.OID, catalog.QuoteIdent(o.Owner))); err != nil {
			return err
		}
		for _, g := range o.Grants {
			if _, err := tx.Exec(ctx, fmt.Sprintf("GRANT %s ON LARGE OBJECT %d TO %s", g.Privilege, o.OID, g.Grantee)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("copy large object %d: %w", o.OID, err)
	}
	return copied, nil
}

// Difference is what differs of one large object.
type Difference struct {
	OID uint32 `json:"oid"`
	// Kind is "only on the source", "only on the target" or "content
	// differs".
	Kind string `json:"kind"`
}

// Comparison is the result of Compare.
type Comparison struct {
	Source, Target int          // objects on each side
	Differ         []Difference // by OID
}

// Identical says whether both sides have the same objects with the same
// content.
func (c Comparison) Identical() bool { return len(c.Differ) == 0 }

// Compare compares the large objects of both sides, each read in its
// session's current transaction: by OID, then by the hash of each.
func Compare(ctx context.Context, src, dst Querier) (Comparison, error) {
	var c Comparison
	srcObjs, err := List(ctx, src)
	if err != nil {
		return c, fmt.Errorf("source: %w", err)
	}
	dstObjs, err := List(ctx, dst)
	if err != nil {
		return c, fmt.Errorf("target: %w", err)
	}
	c.Source, c.Target = len(srcObjs), len(dstObjs)
	onTarget := make(map[uint32]bool, len(dstObjs))
	for _, o := range dstObjs {
		onTarget[o.OID] = true
	}
	onSource := make(map[uint32]bool, len(srcObjs))
	for _, o := range srcObjs {
		onSource[o.OID] = true
		if !onTarget[o.OID] {
			c.Differ = append(c.Differ, Difference{OID: o.OID, Kind: "only on the source"})
			continue
		}
		a, err := HashOf(ctx, src, o.OID)
		if err != nil {
			return c, fmt.Errorf("source: %w", err)
		}
		b, err := HashOf(ctx, dst, o.OID)
		if err != nil {
			return c, fmt.Errorf("target: %w", err)
		}
		if a != b {
			c.Differ = append(c.Differ, Difference{OID: o.OID, Kind: "content differs"})
		}
	}
	for _, o := range dstObjs {
		if !onSource[o.OID] {
			c.Differ = append(c.Differ, Difference{OID: o.OID, Kind: "only on the target"})
		}
	}
	slices.SortFunc(c.Differ, func(a, b Difference) int { return int(a.OID) - int(b.OID) })
	return c, nil
}

// Sync brings dst's large objects in line with src's: each one dst lacks
// or holds with other content is copied, and each one pgsync copied for
// job that src no longer has is removed (objects dst had of its own stay,
// and are reported). It returns what it found before it acted, and what
// it did. dst's ledger is at the latest version (ledger.Ensure).
func Sync(ctx context.Context, src Querier, dst *pgx.Conn, job string) (found Comparison, copied, removed int, err error) {
	found, err = Compare(ctx, src, dst)
	if err != nil || found.Identical() {
		return found, 0, 0, err
	}
	srcObjs, err := List(ctx, src)
	if err != nil {
		return found, 0, 0, fmt.Errorf("source: %w", err)
	}
	byOID := make(map[uint32]Object, len(srcObjs))
	for _, o := range srcObjs {
		byOID[o.OID] = o
	}
	for _, d := range found.Differ {
		switch d.Kind {
		case "only on the target":
			gone, err := ledger.RemoveLargeObject(ctx, dst, job, d.OID)
			if err != nil {
				return found, copied, removed, fmt.Errorf("the source no longer has it: %w", err)
			}
			if gone {
				removed++
			}
		default:
			if _, err := Copy(ctx, src, dst, byOID[d.OID], job); err != nil {
				return found, copied, removed, err
			}
			copied++
		}
	}
	return found, copied, removed, nil
}
