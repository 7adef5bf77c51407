// Package pattern is the syntax of the table patterns of job.tables:
// config validates them, catalog selects tables with them on the source,
// and a Matcher tells in memory whether a table is named. It imports
// nothing of pgsync, so that config need not import catalog.
package pattern

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// A table pattern is schema.table. Each part is either a glob of letters,
// digits, '_', '$' and '*' (any run of characters), matched as written, or
// an identifier in double quotes, matched exactly and able to hold any
// character: "Sales Dept".*, public."Order Lines", "a.b"."x""y".

// errPattern explains the syntax; Parse returns it.
var errPattern = errors.New(`want schema.table, each part a glob of letters, digits, '_', '$' and '*', or a "quoted identifier"`)

// Parse splits a schema.table pattern into LIKE patterns for the schema
// and the table name.
func Parse(p string) (schemaLike, nameLike string, err error) {
	schema, rest, err := patternPart(p)
	if err != nil {
		return "", "", err
	}
	if !strings.HasPrefix(rest, ".") {
		return "", "", errPattern
	}
	name, rest, err := patternPart(rest[1:])
	if err != nil {
		return "", "", err
	}
	if rest != "" {
		return "", "", errPattern
	}
	return schema, name, nil
}

// patternPart reads one part from the start of s and returns it as a LIKE
// pattern, with what follows it.
func patternPart(s string) (like, rest string, err error) {
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			if s[i] != '"' {
				b.WriteByte(s[i])
				continue
			}
			if i+1 < len(s) && s[i+1] == '"' { // "" is a quote inside
				b.WriteByte('"')
				i++
				continue
			}
			if b.Len() == 0 {
				return "", "", errPattern
			}
			return likeEscaper.Replace(b.String()), s[i+1:], nil
		}
		return "", "", errPattern // unterminated
	}
	end := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '$' || r == '*')
	})
	if end < 0 {
		end = len(s)
	}
	if end == 0 {
		return "", "", errPattern
	}
	return likePattern(s[:end]), s[end:], nil
}

// likeEscaper escapes LIKE's special characters: a quoted part matches
// exactly.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// likePattern turns a glob ('*' for any run of characters) into a LIKE pattern.
func likePattern(glob string) string {
	return strings.ReplaceAll(likeEscaper.Replace(glob), "*", "%")
}

// Matcher tells whether a table is named by a list of patterns, as
// catalog.Resolve selects tables with them.
type Matcher struct{ parts [][2]*regexp.Regexp }

// NewMatcher compiles patterns (each as Parse takes it).
func NewMatcher(patterns []string) (*Matcher, error) {
	m := &Matcher{}
	for _, p := range patterns {
		s, n, err := Parse(p)
		if err != nil {
			return nil, fmt.Errorf("table pattern %q: %w", p, err)
		}
		m.parts = append(m.parts, [2]*regexp.Regexp{
			regexp.MustCompile(`^` + likeRegexp(s) + `$`), regexp.MustCompile(`^` + likeRegexp(n) + `$`)})
	}
	return m, nil
}

// Matches says whether schema.name is named by one of the patterns.
func (m *Matcher) Matches(schema, name string) bool {
	// Schema and name are matched apart, as catalog.Resolve does: a dot
	// inside either must not join them.
	for _, re := range m.parts {
		if re[0].MatchString(schema) && re[1].MatchString(name) {
			return true
		}
	}
	return false
}

// likeRegexp turns a LIKE pattern (likePattern's and likeEscaper's output)
// into a regular expression.
func likeRegexp(like string) string {
	var b strings.Builder
	for i := 0; i < len(like); i++ {
		switch c := like[i]; {
		case c == '\\' && i+1 < len(like):
			i++
			b.WriteString(regexp.QuoteMeta(like[i : i+1]))
		case c == '%':
			b.WriteString(`.*`)
		case c == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(like[i : i+1]))
		}
	}
	return b.String()
}
