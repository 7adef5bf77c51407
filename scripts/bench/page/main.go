// Command page writes docs/benchmarks.md and docs/benchmarks-details.md,
// and the charts under docs/img/benchmarks/, from the results the bench
// scripts leave in bench-results/. Every figure comes from those files,
// each commit from their "environment" (issue 25).
//
//	cd scripts/bench && go run ./page -root ../..
package main

import (
	"bytes"
	"embed"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"text/template"
)

//go:embed *.md.tmpl
var templates embed.FS

func main() {
	root := flag.String("root", "../..", "the repository root, which holds bench-results/ and docs/")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "page:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	r, err := load(root)
	if err != nil {
		return err
	}
	p, err := build(root, r)
	if err != nil {
		return err
	}
	docs := filepath.Join(root, "docs")
	if err := os.MkdirAll(filepath.Join(docs, chartDir), 0o755); err != nil {
		return err
	}
	if p.Charts, err = drawCharts(root, docs, r, p); err != nil {
		return err
	}
	pages, err := render(p)
	if err != nil {
		return err
	}
	for name, text := range pages {
		if err := os.WriteFile(filepath.Join(docs, name), text, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// render executes both templates: the pages by their file names in docs/.
func render(p *Page) (map[string][]byte, error) {
	t, err := template.New("").Funcs(funcs).ParseFS(templates, "*.md.tmpl")
	if err != nil {
		return nil, err
	}
	pages := map[string][]byte{}
	for name, out := range map[string]string{"benchmarks.md.tmpl": "benchmarks.md", "details.md.tmpl": "benchmarks-details.md"} {
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, name, p); err != nil {
			return nil, err
		}
		pages[out] = buf.Bytes()
	}
	return pages, nil
}

// funcs format figures for the templates; the arithmetic they call is
// summary.go's.
var funcs = template.FuncMap{
	"f0":        func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f1":        func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":        f2,
	"f3":        func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"mb":        func(v float64) string { return fmt.Sprintf("%.1f", v/1e6) },
	"gb":        func(v float64) string { return fmt.Sprintf("%.2f", v/1e9) },
	"thousands": func(v any) string { return thousandsAny(v) },
	"ratio":     ratio,
	"span":      span,
	"yes":       yes,
	"same":      func(ok bool) string { return map[bool]string{true: "identical", false: "**DIFFER**"}[ok] },
	"add":       func(a, b float64) float64 { return a + b },
	"pct":       func(a, b float64) (string, error) { q, err := ratio(a, b); return fmt.Sprintf("%.0f", q*100), err },
	"inc":       func(i int) int { return i + 1 },
	"seconds":   func(xs []float64) string { return joinF2(xs) },
	"deref":     func(v *float64) float64 { return *v },
	"optional":  optional,
	"rowsOf":    rowsOf,
	"float":     func(v int64) float64 { return float64(v) },
	"millions":  func(v float64) float64 { return v / 1e6 },
}

func thousandsAny(v any) string {
	switch n := v.(type) {
	case int:
		return thousands(int64(n))
	case int64:
		return thousands(n)
	case float64:
		return thousands(int64(n))
	}
	return fmt.Sprint(v)
}

// optional is a measurement that may be missing: "12.34 s", or "–" for a
// contender or step the run did not measure.
func optional(v *float64) string {
	if v == nil {
		return "–"
	}
	return f2(*v) + " s"
}

// rowsOf is a count that may be missing: "188,040", or "–" when the run
// did not count it.
func rowsOf(v *int64) string {
	if v == nil {
		return "–"
	}
	return thousandsAny(*v)
}
