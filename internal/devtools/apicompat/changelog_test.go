package apicompat

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseChangelog(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"# Changelog",
		"",
		"Intro naming `Run.gone` without a note.",
		"",
		"## Unreleased",
		"",
		"### Breaking",
		"",
		"- `Run.context`, `POST /api/v1/runs/{id}/start`: changed.",
		"  Migration: read it differently.",
		"- `Run.state`: changed, no note.",
		"",
		"## 1.1.0 — 2026-12-02",
		"",
		"- `Run.old`: removed. Migration: none needed.",
		"",
		"## 1.0.0 — 2026-12-01",
	}, "\n")
	c, err := ParseChangelog(text)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Released, []string{"1.1.0", "1.0.0"}) || c.Latest() != "1.1.0" {
		t.Fatalf("released %v latest %q", c.Released, c.Latest())
	}
	breaks := []Break{
		{"GraphQL", "Run.context", "nullable"},
		{"REST", "POST /api/v1/runs/{id}/start", "body"},
		{"GraphQL", "Run.state", "no note"},
		{"GraphQL", "Run.old", "listed under a released version only"},
		{"GraphQL", "Run.gone", "named outside a version"},
		{"GraphQL", "Run", "a prefix of a listed subject"},
	}
	var got []string
	for _, b := range c.Unlisted(breaks) {
		got = append(got, b.Subject)
	}
	if want := []string{"Run.state", "Run.old", "Run.gone", "Run"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("unlisted %q, want %q", got, want)
	}
}

func TestParseChangelogRefusesDisorder(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"## 1.0.0\n## 1.1.0\n",
		"## 1.0.0\n## 1.0.0\n",
	} {
		if _, err := ParseChangelog(text); err == nil {
			t.Errorf("%q parsed", text)
		}
	}
}
