package conformance

import (
	"os"
	"strings"
	"testing"
)

// TestEveryScenarioSaysItsFix: every scenario names what fixes its
// failure, as one clause that a failure's detail can end with.
func TestEveryScenarioSaysItsFix(t *testing.T) {
	t.Parallel()
	for _, s := range scenarios {
		switch {
		case s.fix == "":
			t.Errorf("%s says no fix (scenario.fix)", s.name)
		case strings.HasSuffix(s.fix, ".") || strings.Contains(s.fix, "\n"):
			t.Errorf("%s: the fix %q is no clause of one line", s.name, s.fix)
		}
	}
}

// TestDocsListEveryScenario: docs/adapter.md lists every scenario with
// what it needs and its rule (the first table of "Checking an adapter")
// and with the fix the kit prints (the second), so the page cannot drift
// from the kit.
func TestDocsListEveryScenario(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/adapter.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(page), "\n") {
		if name, rest, ok := strings.Cut(line, "` | "); ok && strings.HasPrefix(name, "| `") {
			name = strings.TrimPrefix(name, "| `")
			rows[name] = append(rows[name], strings.ReplaceAll(rest, `\|`, "|"))
		}
	}
	for _, s := range scenarios {
		needs := "–"
		if len(s.needs) > 0 {
			needs = strings.Join(s.needs, ", ")
		}
		var rule, fix bool
		for _, r := range rows[s.name] {
			rule = rule || strings.HasPrefix(r, needs+" | ")
			fix = fix || r == s.fix+" |"
		}
		if !rule {
			t.Errorf("docs/adapter.md has no row | `%s` | %s | (the rule it checks)", s.name, needs)
		}
		if !fix {
			t.Errorf("docs/adapter.md has no row | `%s` | %s |", s.name, s.fix)
		}
	}
}
