// Package largeobject carries a database's large objects, which logical
// decoding does not: bootstrap copies them under the slot's snapshot,
// verify compares them (a hash of each, and its owner, grants and
// comment), and cutover brings the target's in line with the locked
// source before it reports the target ready.
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

// Object is one large object's identity, owner, privileges and comment:
// everything of it but its content.
type Object struct {
	OID   uint32
	Owner string
	// Grants are "SELECT" or "UPDATE" to a role ("PUBLIC" for all), in
	// the order List reads them; the owner's own are left out.
	Grants []Grant
	// Comment is COMMENT ON LARGE OBJECT's text, "" when there is none
	// (PostgreSQL stores no empty comment: IS '' removes it).
	Comment string
}

// Grant is one privilege on a large object.
type Grant struct{ Privilege, Grantee string }

// List returns the large objects q sees, by OID, in one query whatever
// their number. A large object's comment is filed in pg_description under
// pg_largeobject's OID, not pg_largeobject_metadata's (as psql's \lo_list
// reads it).
func List(ctx context.Context, q Querier) ([]Object, error) {
	rows, err := q.Query(ctx, `SELECT m.oid, pg_get_userbyid(m.lomowner)::text,
  coalesce((SELECT array_agg(a.privilege_type || ' ' || CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(pg_get_userbyid(a.grantee)) END ORDER BY 1)
            FROM aclexplode(m.lomacl) a WHERE a.grantee <> m.lomowner), '{}'),
  coalesce(d.description, '')
FROM pg_largeobject_metadata m
LEFT JOIN pg_description d ON d.classoid = 'pg_catalog.pg_largeobject'::regclass AND d.objoid = m.oid AND d.objsubid = 0
ORDER BY m.oid`)
	if err != nil {
		return nil, fmt.Errorf("list large objects: %w", err)
	}
	objs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Object, error) {
		var o Object
		var grants []string
		if err := r.Scan(&o.OID, &o.Owner, &grants, &o.Comment); err != nil {
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
// (replacing one dst has), its content chunk by chunk, its owner, its
// grants and its comment. It returns the bytes copied.
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
		// Created anew, owned by pgsync's role with no grants and no
		// comment: an empty have sets all three.
		return setMetadata(ctx, tx, o, Object{OID: o.OID})
	})
	if err != nil {
		return 0, fmt.Errorf("copy large object %d: %w", o.OID, err)
	}
	return copied, nil
}
