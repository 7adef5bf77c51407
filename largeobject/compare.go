package largeobject

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Difference is what differs of one large object.
type Difference struct {
	OID uint32 `json:"oid"`
	// Kind is "only on the source", "only on the target", or what differs
	// of an object both sides have, "; " between: "content differs",
	// then "owner differs", "grants differ" and "comment differs", each
	// with both sides' values, so that the operator sees what to fix.
	Kind string `json:"kind"`
	// Content says the content differs: Sync copies such an object whole,
	// and carries only the owner, grants and comment of one whose content
	// is the same (a changed comment does not cost a copy of the bytes).
	Content bool `json:"content,omitempty"`
}

// Comparison is the result of Compare.
type Comparison struct {
	Source, Target int          // objects on each side
	Differ         []Difference // by OID
}

// Identical says whether both sides have the same objects with the same
// content, owner, grants and comment.
func (c Comparison) Identical() bool { return len(c.Differ) == 0 }

// Compare compares the large objects of both sides, each read in its
// session's current transaction: by OID, by owner, grants and comment
// (one query a side for all objects), then by the hash of each.
func Compare(ctx context.Context, src, dst Querier) (Comparison, error) {
	c, _, _, err := compare(ctx, src, dst)
	return c, err
}

// compare is Compare, returning also both sides' objects by OID, which
// Sync needs to act on what differs.
func compare(ctx context.Context, src, dst Querier) (c Comparison, srcObjs, dstObjs map[uint32]Object, err error) {
	if srcObjs, err = listByOID(ctx, src); err != nil {
		return c, nil, nil, fmt.Errorf("source: %w", err)
	}
	if dstObjs, err = listByOID(ctx, dst); err != nil {
		return c, nil, nil, fmt.Errorf("target: %w", err)
	}
	c.Source, c.Target = len(srcObjs), len(dstObjs)
	for oid, s := range srcObjs {
		t, ok := dstObjs[oid]
		if !ok {
			c.Differ = append(c.Differ, Difference{OID: oid, Kind: "only on the source"})
			continue
		}
		a, err := HashOf(ctx, src, oid)
		if err != nil {
			return c, nil, nil, fmt.Errorf("source: %w", err)
		}
		b, err := HashOf(ctx, dst, oid)
		if err != nil {
			return c, nil, nil, fmt.Errorf("target: %w", err)
		}
		if d, ok := differ(s, t, a == b); ok {
			c.Differ = append(c.Differ, d)
		}
	}
	for oid := range dstObjs {
		if _, ok := srcObjs[oid]; !ok {
			c.Differ = append(c.Differ, Difference{OID: oid, Kind: "only on the target"})
		}
	}
	slices.SortFunc(c.Differ, func(a, b Difference) int { return cmpOID(a.OID, b.OID) })
	return c, srcObjs, dstObjs, nil
}

// listByOID is List, by OID.
func listByOID(ctx context.Context, q Querier) (map[uint32]Object, error) {
	objs, err := List(ctx, q)
	if err != nil {
		return nil, err
	}
	byOID := make(map[uint32]Object, len(objs))
	for _, o := range objs {
		byOID[o.OID] = o
	}
	return byOID, nil
}

// cmpOID orders OIDs without the overflow of a subtraction (OIDs use all
// 32 bits).
func cmpOID(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// differ says what differs between the source's object s and the
// target's object t of the same OID, given whether their content is the
// same; ok is false when nothing does.
func differ(s, t Object, sameContent bool) (d Difference, ok bool) {
	var what []string
	if !sameContent {
		what = append(what, "content differs")
	}
	if s.Owner != t.Owner {
		what = append(what, fmt.Sprintf("owner differs (source %s, target %s)", s.Owner, t.Owner))
	}
	if !slices.Equal(s.Grants, t.Grants) {
		what = append(what, fmt.Sprintf("grants differ (source %s, target %s)", grantsText(s.Grants), grantsText(t.Grants)))
	}
	if s.Comment != t.Comment {
		what = append(what, fmt.Sprintf("comment differs (source %s, target %s)", commentText(s.Comment), commentText(t.Comment)))
	}
	if len(what) == 0 {
		return d, false
	}
	return Difference{OID: s.OID, Kind: strings.Join(what, "; "), Content: !sameContent}, true
}

// grantsText is grants as a line names them: "SELECT to alice, UPDATE to
// PUBLIC", or "none".
func grantsText(grants []Grant) string {
	if len(grants) == 0 {
		return "none"
	}
	parts := make([]string, len(grants))
	for i, g := range grants {
		parts[i] = g.Privilege + " to " + g.Grantee
	}
	return strings.Join(parts, ", ")
}

// commentTextRunes is how much of a comment a difference quotes: enough
// to tell two apart, short enough for one line of verify's report.
const commentTextRunes = 40

// commentText is a comment as a line quotes it, cut at commentTextRunes,
// or "none".
func commentText(c string) string {
	if c == "" {
		return "none"
	}
	if r := []rune(c); len(r) > commentTextRunes {
		return fmt.Sprintf("%q...", string(r[:commentTextRunes]))
	}
	return fmt.Sprintf("%q", c)
}
