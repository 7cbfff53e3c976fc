package conformance

import (
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
