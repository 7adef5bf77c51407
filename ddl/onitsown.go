package ddl

import "strings"

// A statement that cannot run in a transaction block (CREATE INDEX
// CONCURRENTLY, DROP INDEX CONCURRENTLY, REINDEX ... CONCURRENTLY, ALTER
// TABLE ... DETACH PARTITION ... CONCURRENTLY) is alone in its statement
// string and in its source transaction on the source too. The target runs
// it the same way, on its own, after committing the source transactions
// before it, and then applies the rest of its source transaction, whose
// commit moves the position past it.
//
// So a kill can fall between the statement and the commit that records
// it, and the next run meets the statement again. What makes it take
// effect once is the target's catalog, read before it runs, in the
// statement's search_path (OnItsOwn.Todo): an index of that name that is
// valid was built, and is not built again; one left invalid by a build
// that was cut is dropped and built again; an index already gone is not
// dropped again; a partition already detached is not detached again, and
// one whose concurrent detach was cut is finished with DETACH PARTITION
// ... FINALIZE; a REINDEX runs again (it is idempotent), after the
// invalid _ccnew/_ccold indexes a cut one leaves on its table are
// dropped.

// OnItsOwn is a captured statement that runs on the target on its own,
// outside a transaction block.
type OnItsOwn struct {
	Statement string
	// Todo is a query returning one row with one text[] column: the
	// statements the target still runs for Statement, in order, each on
	// its own; none when its effect is on the target already. Its
	// parameters are Args, with Statement first.
	Todo string
	Args []any
}

// The Todo queries. $1 is the statement; the names are as written in it,
// resolved with to_regclass in the statement's search_path.
const (
	// $2 the index, $3 its table: an index is created in its table's
	// schema.
	todoCreateIndex = `SELECT CASE WHEN i.indisvalid THEN '{}'::text[]
  WHEN i.indisvalid IS NULL THEN ARRAY[$1::text]
  ELSE ARRAY['DROP INDEX CONCURRENTLY ' || i.indexrelid::pg_catalog.regclass::text, $1::text] END
FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = pg_catalog.to_regclass(
  (SELECT c.relnamespace::pg_catalog.regnamespace::text FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass($3::text)) || '.' || $2::text)`
	// $2 the index.
	todoDropIndex = `SELECT CASE WHEN pg_catalog.to_regclass($2::text) IS NULL THEN '{}'::text[] ELSE ARRAY[$1::text] END`
	// $2 the table whose cut concurrent reindex left invalid indexes.
	todoReindex = `SELECT ARRAY(SELECT 'DROP INDEX CONCURRENTLY ' || i.indexrelid::pg_catalog.regclass::text
  FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
  WHERE i.indrelid = pg_catalog.to_regclass($2::text) AND NOT i.indisvalid AND c.relname ~ '_cc(new|old)[0-9]*$' ORDER BY 1) || $1::text`
	todoAlways = `SELECT ARRAY[$1::text]`
	// $2 the partitioned table, $3 the partition.
	todoDetach = `SELECT CASE WHEN pg_catalog.to_regclass($2::text) IS NULL OR pg_catalog.to_regclass($3::text) IS NULL THEN ARRAY[$1::text]
  WHEN h.inhrelid IS NULL THEN '{}'::text[]
  WHEN h.inhdetachpending THEN ARRAY['ALTER TABLE ' || h.inhparent::pg_catalog.regclass::text || ' DETACH PARTITION ' || h.inhrelid::pg_catalog.regclass::text || ' FINALIZE']
  ELSE ARRAY[$1::text] END
FROM (SELECT 1) one LEFT JOIN pg_catalog.pg_inherits h ON h.inhrelid = pg_catalog.to_regclass($3::text) AND h.inhparent = pg_catalog.to_regclass($2::text)`
)

// planOnItsOwn reads the names st acts on, for its Todo query. A statement
// whose effect the target's catalog cannot tell (an index built without a
// name, which the server names) is refused.
func planOnItsOwn(st string) (*OnItsOwn, *Refusal) {
	p := parser{toks: tokens(st)}
	own := &OnItsOwn{Statement: st, Args: []any{st}}
	unreadable := &Refusal{Statement: st, Why: "it cannot run in a transaction block, and pgsync cannot read which object it acts on",
		Fix: "run it on the target by hand"}
	switch {
	case p.accept("CREATE"):
		p.accept("UNIQUE")
		p.accept("INDEX")
		p.accept("CONCURRENTLY")
		if p.accept("IF") {
			p.accept("NOT")
			p.accept("EXISTS")
		}
		var index string
		if !p.is("ON") {
			index = p.name()
		}
		if !p.accept("ON") {
			return nil, unreadable
		}
		p.accept("ONLY")
		table := p.name()
		if index == "" {
			return nil, &Refusal{Statement: st, Why: "an index built CONCURRENTLY without a name: the target cannot tell whether a run that was cut built it",
				Fix: "build it on the target by hand under the name the source gave it"}
		}
		own.Todo, own.Args = todoCreateIndex, append(own.Args, index, table)
	case p.accept("DROP"):
		p.accept("INDEX")
		p.accept("CONCURRENTLY")
		if p.accept("IF") {
			p.accept("EXISTS")
		}
		own.Todo, own.Args = todoDropIndex, append(own.Args, p.name())
	case p.accept("REINDEX"):
		p.skipParens()
		what := p.word()
		p.accept("CONCURRENTLY")
		switch what {
		case "TABLE":
			own.Todo, own.Args = todoReindex, append(own.Args, p.name())
		case "INDEX":
			own.Todo = strings.Replace(todoReindex, "pg_catalog.to_regclass($2::text)",
				"(SELECT x.indrelid FROM pg_catalog.pg_index x WHERE x.indexrelid = pg_catalog.to_regclass($2::text))", 1)
			own.Args = append(own.Args, p.name())
		default:
			own.Todo = todoAlways
		}
	case p.accept("ALTER"):
		p.accept("TABLE")
		if p.accept("IF") {
			p.accept("EXISTS")
		}
		p.accept("ONLY")
		parent := p.name()
		p.accept("*")
		if !p.accept("DETACH") || !p.accept("PARTITION") {
			return nil, unreadable
		}
		own.Todo, own.Args = todoDetach, append(own.Args, parent, p.name())
	}
	for _, a := range own.Args[1:] {
		if a == "" {
			return nil, unreadable
		}
	}
	if own.Todo == "" {
		return nil, unreadable
	}
	return own, nil
}

// tokens returns all of st's tokens.
func tokens(st string) []token {
	var out []token
	s := scanner{src: st}
	for {
		tok, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, tok)
	}
}

// parser reads a statement's tokens front to back.
type parser struct {
	toks []token
	i    int
}

// is says whether the next token is the keyword or punctuation w (upper
// case).
func (p *parser) is(w string) bool {
	if p.i >= len(p.toks) {
		return false
	}
	t := p.toks[p.i]
	return (t.word && strings.EqualFold(t.text, w)) || (!t.word && !t.quotedIdent && t.text == w)
}

// accept consumes the next token when it is w.
func (p *parser) accept(w string) bool {
	if p.is(w) {
		p.i++
		return true
	}
	return false
}

// word consumes the next token and returns it upper-cased when it is a
// bare word, and "" otherwise.
func (p *parser) word() string {
	if p.i >= len(p.toks) || !p.toks[p.i].word {
		return ""
	}
	p.i++
	return strings.ToUpper(p.toks[p.i-1].text)
}

// name consumes a possibly qualified name (a.b, "A".b) and returns it as
// written, or "" when none is next.
func (p *parser) name() string {
	var parts []string
	for p.i < len(p.toks) && (p.toks[p.i].word || p.toks[p.i].quotedIdent) {
		parts = append(parts, p.toks[p.i].text)
		p.i++
		if !p.is(".") {
			break
		}
		p.i++
	}
	return strings.Join(parts, ".")
}

// skipParens consumes a parenthesised list (REINDEX's options), nested
// ones included, when one is next.
func (p *parser) skipParens() {
	if !p.is("(") {
		return
	}
	depth := 0
	for ; p.i < len(p.toks); p.i++ {
		switch {
		case p.is("("):
			depth++
		case p.is(")"):
			depth--
			if depth == 0 {
				p.i++
				return
			}
		}
	}
}
