package doccite_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/doccite"
)

// TestDocCitations fails when a Go comment or a document of the repository
// cites a page, a heading or a path the repository does not have, or the
// outside specification.
func TestDocCitations(t *testing.T) {
	problems, err := doccite.Check(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestCheckFindsBrokenCitations proves the checker on a small repository of
// its own: every kind of broken citation is reported, every good one is not.
func TestCheckFindsBrokenCitations(t *testing.T) {
	root := t.TempDir()
	file := func(rel, text string) { write(t, root, rel, text) }
	file("docs/design/rules.md", "# Rules\n\n## Fail closed\n\n```sh\n# not a heading\n```\n\n## Fail closed\n\nSee [the other](other.md#intro) and [here](#fail-closed).\n")
	file("docs/design/other.md", "# Intro\n")
	file("docs/api/openapi.yaml", "description: see docs/design/rules.md#fail-closed-1\n")
	file("good/good.go", `// Package good cites docs/design/rules.md#fail-closed, other paths
// like docs/api/openapi.yaml, and https://example.com/nowhere/x.md.
package good

// S holds in a string, which is no citation, what a comment may not cite.
const S = "domain.md M2-13 SR4"
`)
	file("bad/bad.go", `// Package bad cites what does not exist.
package bad

// A follows spec domain.md 5 and seed M2-13 note 4 (SEC-AI-1, SR4, AG-01).
// B cites docs/design/rules.md#no-such-heading and docs/design/gone.md.
// C cites docs/missing.yaml and api.md.
const A = 1
`)
	file("docs/bad.md", "Broken: [x](design/nowhere.md), [y](#nowhere), [z](design/rules.md#nope), R-DM-14. Fine: D-M2-13-4.\n```sh\ncat layout/nowhere.md # M1-44\n```\n")
	file("migrations/00001_x.sql", "-- the rule of world.md\n")
	file("node_modules/pkg/README.md", "[ignored](missing.md)\n")

	problems, err := doccite.Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.File+" "+p.Cite)
	}
	want := []string{
		"bad/bad.go spec domain",
		"bad/bad.go domain.md",
		"bad/bad.go M2-13",
		"bad/bad.go seed M",
		"bad/bad.go SEC-AI-1",
		"bad/bad.go SR4",
		"bad/bad.go AG-01",
		"bad/bad.go docs/design/rules.md#no-such-heading",
		"bad/bad.go docs/design/gone.md",
		"bad/bad.go api.md",
		"bad/bad.go docs/missing.yaml",
		"docs/bad.md R-DM-14",
		"docs/bad.md M1-44",
		"docs/bad.md design/nowhere.md",
		"docs/bad.md #nowhere",
		"docs/bad.md design/rules.md#nope",
		"migrations/00001_x.sql world.md",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s\nall:\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), problems)
	}
}

// TestAnchors checks the heading anchors the way GitHub renders them.
func TestAnchors(t *testing.T) {
	got, err := doccite.Anchors(strings.NewReader("# Runs and sessions\n## Claims, leases & `takeover`\n```\n# code\n```\n## Claims, leases & takeover\n#nottitle\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"runs-and-sessions", "claims-leases--takeover", "claims-leases--takeover-1"}
	if !slices.Equal(got, want) {
		t.Errorf("anchors %v, want %v", got, want)
	}
}
