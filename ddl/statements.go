package ddl

import (
	"fmt"
	"strings"

	"github.com/pgsync/pgsync/catalog"
)

// What the target runs for a captured record.
//
// The record's text is current_query(): the whole string the client sent.
// A string may hold several commands ("ALTER TABLE ...; CREATE INDEX
// ...;"), and the event trigger fires for each DDL command in it, each
// time with the whole string. The capture therefore emits the string once
// per statement string (its guard: the transaction, statement_timestamp()
// and the text), at the end of the first DDL command of it that touches
// the job's schemas; here it is split into its top-level statements and
// judged as a whole:
//
//   - DDL statements are run, in order, as one string, in the target
//     transaction of the source transaction, at the message's place;
//   - BEGIN, START TRANSACTION, COMMIT and END are left out (the target
//     transaction is the source transaction's), as are SET and RESET (the
//     search_path the commands ran with is carried; other settings are
//     the target session's own);
//   - anything else (INSERT, UPDATE, SELECT, DO, CALL, SAVEPOINT,
//     ROLLBACK ...) refuses the string: its rows are in the stream
//     already, or its effect cannot be known from its text, and replaying
//     it would apply them twice or guess;
//   - a statement that cannot run in a transaction block (CREATE INDEX
//     CONCURRENTLY, DROP INDEX CONCURRENTLY, REINDEX CONCURRENTLY, DETACH
//     PARTITION CONCURRENTLY) cannot share its string with another one on
//     the source either: it runs on its own (onitsown.go).
//
// A refusal stops run at the message, with the statement and the fix:
// run what it meant by hand on the target, then pgsync run --skip-ddl
// <lsn>.

// Refusal says why a captured statement string is not run on the target,
// and what to run by hand instead.
type Refusal struct {
	Statement string // the statement that decided it
	Why       string
	Fix       string
}

// Error words the refusal on one line.
func (r *Refusal) Error() string {
	return fmt.Sprintf("%s: %s (%s)", oneLine(r.Statement), r.Why, r.Fix)
}

// Planned is what the target runs for a captured statement string.
type Planned struct {
	// InTransaction is the string's DDL statements joined into one string
	// for the simple protocol, run in the target transaction of the
	// source transaction; empty runs nothing.
	InTransaction string
	// OnItsOwn, when set, is the string's one statement, which cannot run
	// in a transaction block.
	OnItsOwn *OnItsOwn
}

// Plan returns what the target runs for the statement string query, or
// the refusal.
func Plan(query string) (Planned, *Refusal) {
	var run []string
	stmts := Split(query)
	for _, st := range stmts {
		words := leadingWords(st, 8)
		switch kind(words) {
		case kindDDL:
			if concurrent(st, words) {
				if len(stmts) > 1 {
					return Planned{}, &Refusal{Statement: st, Why: "it cannot run in a transaction block, and its string holds other statements",
						Fix: "run the string's statements on the target by hand"}
				}
				own, refusal := planOnItsOwn(st)
				return Planned{OnItsOwn: own}, refusal
			}
			run = append(run, st)
		case kindTransaction, kindSetting:
		default:
			return Planned{}, &Refusal{Statement: st, Why: "a statement string that holds DDL holds this too, which is not DDL: its rows are in the stream already, or its effect cannot be known from its text",
				Fix: "run the string's DDL on the target by hand"}
		}
	}
	return Planned{InTransaction: strings.Join(run, ";\n")}, nil
}

// TargetSQL is the string the target runs for the statements stmts
// (Plan's), captured with searchPath: the search_path set for them alone,
// then the session's own back, all in the open target transaction
// (set_config's is_local: a failure rolls everything back anyway).
func TargetSQL(stmts, searchPath string) string {
	return "SELECT pg_catalog.set_config('pgsync.saved_search_path', pg_catalog.current_setting('search_path'), true), pg_catalog.set_config('search_path', " +
		catalog.QuoteLiteral(searchPath) + ", true);\n" + stmts +
		";\nSELECT pg_catalog.set_config('search_path', pg_catalog.current_setting('pgsync.saved_search_path'), true)"
}

type stmtKind int

const (
	kindOther stmtKind = iota
	kindDDL
	kindTransaction
	kindSetting
)

// kind classifies a statement by its first words (upper-cased).
func kind(words []string) stmtKind {
	if len(words) == 0 {
		return kindSetting // nothing but comments: nothing to run
	}
	switch words[0] {
	case "CREATE", "ALTER", "DROP", "COMMENT", "GRANT", "REVOKE", "SECURITY", "REINDEX", "REFRESH", "IMPORT":
		return kindDDL
	case "BEGIN", "COMMIT", "END":
		return kindTransaction
	case "START":
		if len(words) > 1 && words[1] == "TRANSACTION" {
			return kindTransaction
		}
	case "SET", "RESET":
		// SET CONSTRAINTS and SET TRANSACTION are settings of the target
		// transaction, which is not the client's: left out too.
		return kindSetting
	}
	return kindOther
}

// concurrent says whether the DDL statement st cannot run in a transaction
// block: its leading words name CONCURRENTLY (CREATE [UNIQUE] INDEX
// CONCURRENTLY, DROP INDEX CONCURRENTLY, REINDEX ... CONCURRENTLY), or an
// ALTER TABLE detaches a partition CONCURRENTLY. REFRESH MATERIALIZED VIEW
// CONCURRENTLY runs in one.
func concurrent(st string, words []string) bool {
	switch words[0] {
	case "CREATE", "DROP", "REINDEX":
		for _, w := range words {
			if w == "CONCURRENTLY" {
				return true
			}
		}
	case "ALTER":
		all := leadingWords(st, -1)
		for i := 1; i < len(all); i++ {
			if all[i] == "CONCURRENTLY" && hasWord(all[:i], "DETACH") {
				return true
			}
		}
	}
	return false
}

func hasWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// leadingWords returns up to n (all when n < 0) of st's bare words,
// upper-cased, outside comments, quotes and strings.
func leadingWords(st string, n int) []string {
	var words []string
	s := scanner{src: st}
	for n < 0 || len(words) < n {
		tok, ok := s.next()
		if !ok {
			break
		}
		if tok.word {
			words = append(words, strings.ToUpper(tok.text))
		}
	}
	return words
}

// Split splits a statement string into its top-level statements at the
// semicolons outside strings, quoted identifiers, dollar quotes, comments
// and the BEGIN ATOMIC ... END bodies of CREATE FUNCTION and PROCEDURE,
// as psql does. Each is trimmed; empty ones are left out.
func Split(query string) []string {
	var out []string
	s := scanner{src: query}
	start, depth := 0, 0
	var first []string // the statement's leading words, for BEGIN ATOMIC
	emit := func(end int) {
		if st := strings.TrimSpace(query[start:end]); st != "" {
			out = append(out, st)
		}
	}
	for {
		tok, ok := s.next()
		if !ok {
			break
		}
		switch {
		case tok.text == ";" && depth == 0:
			emit(tok.pos)
			start, first = tok.pos+1, nil
		case tok.word:
			w := strings.ToUpper(tok.text)
			if len(first) < 4 {
				first = append(first, w)
			}
			// Only in CREATE [OR REPLACE] FUNCTION/PROCEDURE does a bare
			// BEGIN (of BEGIN ATOMIC) or CASE open a block that END closes.
			if routine(first) {
				switch w {
				case "BEGIN", "CASE":
					depth++
				case "END":
					depth = max(depth-1, 0)
				}
			}
		}
	}
	emit(len(query))
	return out
}

// routine says whether a statement's leading words create a function or
// procedure.
func routine(first []string) bool {
	if len(first) < 2 || first[0] != "CREATE" {
		return false
	}
	for _, w := range first[1:] {
		if w == "FUNCTION" || w == "PROCEDURE" {
			return true
		}
	}
	return false
}

// token is a word, a quoted identifier or a punctuation byte of a
// statement; strings, comments and whitespace are skipped.
type token struct {
	text        string
	pos         int
	word        bool
	quotedIdent bool // text is "..." as written, quotes included
}

// scanner walks SQL text the way PostgreSQL's lexer splits it, as far as
// finding statement ends and bare words needs.
type scanner struct {
	src string
	i   int
}

func (s *scanner) next() (token, bool) {
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			s.i++
		case c == '-' && s.peek(1) == '-':
			for s.i < len(s.src) && s.src[s.i] != '\n' {
				s.i++
			}
		case c == '/' && s.peek(1) == '*':
			s.blockComment()
		case c == '\'':
			escapes := s.i > 0 && (s.src[s.i-1] == 'E' || s.src[s.i-1] == 'e') && (s.i < 2 || !isWordByte(s.src[s.i-2]))
			s.quoted('\'', escapes)
		case c == '"':
			start := s.i
			s.quoted('"', false)
			return token{text: s.src[start:s.i], pos: start, quotedIdent: true}, true
		case c == '$' && s.dollarQuote():
		case isWordStart(c):
			start := s.i
			for s.i < len(s.src) && isWordByte(s.src[s.i]) {
				s.i++
			}
			// E'...': the E is the string's prefix, not a word.
			if s.i < len(s.src) && s.src[s.i] == '\'' && s.i-start == 1 && (c == 'E' || c == 'e') {
				continue
			}
			return token{text: s.src[start:s.i], pos: start, word: true}, true
		default:
			s.i++
			return token{text: s.src[s.i-1 : s.i], pos: s.i - 1}, true
		}
	}
	return token{}, false
}

func (s *scanner) peek(k int) byte {
	if s.i+k < len(s.src) {
		return s.src[s.i+k]
	}
	return 0
}

// blockComment skips a /* comment */, nested ones included.
func (s *scanner) blockComment() {
	depth := 0
	for s.i < len(s.src) {
		switch {
		case s.src[s.i] == '/' && s.peek(1) == '*':
			depth++
			s.i += 2
		case s.src[s.i] == '*' && s.peek(1) == '/':
			depth--
			s.i += 2
			if depth == 0 {
				return
			}
		default:
			s.i++
		}
	}
}

// quoted skips a string or quoted identifier; a doubled quote is a quote
// inside, and with escapes (E'...') so is a backslashed one.
func (s *scanner) quoted(q byte, escapes bool) {
	s.i++
	for s.i < len(s.src) {
		c := s.src[s.i]
		switch {
		case escapes && c == '\\':
			s.i += 2
		case c == q && s.peek(1) == q:
			s.i += 2
		case c == q:
			s.i++
			return
		default:
			s.i++
		}
	}
}

// dollarQuote skips a $tag$ ... $tag$ string when one starts at s.i, and
// says whether it did ($1, a parameter, is not one).
func (s *scanner) dollarQuote() bool {
	j := s.i + 1
	for j < len(s.src) && s.src[j] != '$' {
		if !isWordByte(s.src[j]) || j == s.i+1 && s.src[j] >= '0' && s.src[j] <= '9' {
			return false
		}
		j++
	}
	if j >= len(s.src) {
		return false
	}
	tag := s.src[s.i : j+1]
	end := strings.Index(s.src[j+1:], tag)
	if end < 0 {
		s.i = len(s.src)
	} else {
		s.i = j + 1 + end + len(tag)
	}
	return true
}

func isWordStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}

func isWordByte(c byte) bool { return isWordStart(c) || c >= '0' && c <= '9' || c == '$' }

// oneLine joins a statement's lines and shortens it for a one-line error.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// Short is a statement as errors and log lines quote it: one line, at
// most 200 bytes.
func Short(s string) string { return oneLine(s) }
