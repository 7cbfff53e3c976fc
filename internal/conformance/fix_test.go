package conformance

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// scenarioNamed returns the kit's scenario name, failing the test when the
// kit has none.
func scenarioNamed(t *testing.T, name string) scenario {
	t.Helper()
	s, ok := scenarioByName(name)
	if !ok {
		t.Fatalf("no scenario %s", name)
	}
	return s
}

// TestFailureCarriesItsFix: a failed verdict carries the scenario's fix in
// Result.Fix and at the end of its detail, after the adapter's exits of its
// own during the scenario, and the progress line prints it after "fix:";
// a passed verdict carries none, and a scenario without a fix adds no
// "fix:" to its failure.
func TestFailureCarriesItsFix(t *testing.T) {
	t.Parallel()
	live := scenarioNamed(t, "streams_live_box")
	for _, c := range []struct {
		name string
		s    scenario
		// exit is the status of an exit of the adapter's own during the
		// scenario ("" for none).
		exit string
		// wantDetail and wantFix are the verdict's, wantLine its progress
		// line.
		wantDetail, wantFix, wantLine string
	}{
		{name: "passed", s: scenario{name: "answers_once", fix: "answer once", run: func(context.Context, *kit) error { return nil }},
			wantDetail: "ok", wantLine: "answers_once                    passed\n"},
		{name: "failed with a fix", s: scenario{name: live.name, fix: live.fix, run: func(context.Context, *kit) error { return errors.New("the box stayed empty") }},
			wantDetail: "the box stayed empty; fix: " + live.fix, wantFix: live.fix,
			wantLine: "streams_live_box                FAILED: the box stayed empty; fix: no live box: set Config.Live"},
		{name: "failed after an exit of the adapter's own", s: scenario{name: "cancel_stops", fix: "abort the model call",
			run: func(context.Context, *kit) error { return errors.New("the call went on") }}, exit: "exit status 3",
			wantDetail: "the call went on (the adapter exited once during the scenario, not by the kit: exit status 3); fix: abort the model call",
			wantFix:    "abort the model call",
			wantLine:   "cancel_stops                    FAILED: the call went on (the adapter exited once during the scenario, not by the kit: exit status 3); fix: abort the model call\n"},
		{name: "failed without a fix", s: scenario{name: "untold", run: func(context.Context, *kit) error { return errors.New("no luck") }},
			wantDetail: "no luck", wantLine: "untold                          FAILED: no luck\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			k := &kit{model: newFakeModel()}
			if c.exit != "" {
				// The kit's own kill in the same scenario is no failure
				// and stays out of the detail.
				k.exits = []Exit{{Scenario: c.s.name, Status: "signal: killed", ByKit: true}, {Scenario: c.s.name, Status: c.exit, Code: 3}}
			}
			r := k.runScenario(t.Context(), c.s)
			if r.Name != c.s.name || r.Passed != (c.wantFix == "" && c.wantDetail == "ok") || r.Detail != c.wantDetail || r.Fix != c.wantFix {
				t.Errorf("verdict %+v; want detail %q, fix %q", r, c.wantDetail, c.wantFix)
			}
			var out strings.Builder
			rp := &reporter{k: k, out: &out}
			rp.add(r)
			if !strings.Contains(out.String(), c.wantLine) {
				t.Errorf("the progress line %q lacks %q", out.String(), c.wantLine)
			}
			if rp.rep.Failed+rp.rep.Passed != 1 || (rp.rep.Failed == 1) == r.Passed {
				t.Errorf("counted %d passed, %d failed for %+v", rp.rep.Passed, rp.rep.Failed, r)
			}
		})
	}
}
