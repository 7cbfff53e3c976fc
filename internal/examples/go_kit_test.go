package examples_test

import (
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/conformance"
)

// TestExamplesPassTheKit: every example, built as its users build it and
// run by the conformance kit with the capabilities it declares (the model
// example model, live, tools, files and attach; the echo example none), passes every
// scenario that applies to it and fails none; the kit reports exactly the
// others not applicable (for the echo example, every scenario that needs
// a capability). The examples are where adapters start, so they keep the
// whole run contract, not just the happy path.
func TestExamplesPassTheKit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		dir, capabilities string
	}{
		{"model", "model,live,tools,files,attach"},
		{"echo", "none"},
	} {
		// Each is a full run of the kit, mostly waiting on leases and
		// processes: side by side, and beside the package's other tests.
		t.Run(c.dir, func(t *testing.T) {
			t.Parallel()
			passesTheKit(t, "'"+build(t, c.dir)+"'", c.capabilities)
		})
	}
}

// passesTheKit runs the conformance kit against the adapter command with
// the capabilities it declares ("none" or a comma-separated list) and fails
// t unless it passes every scenario that applies and the kit reports
// exactly the others not applicable (for "none", every scenario that needs
// a capability). Each SDK's tests call it for each of their examples.
func passesTheKit(t *testing.T, adapter, capabilities string) {
	t.Helper()
	notApplicable := scenariosNotApplicableTo(strings.Split(capabilities, ","))
	// Six kits run side by side here, beside the rest of make test on two
	// cores (a fresh clone's CI compiles everything meanwhile): the
	// deadlines of their scenarios are five times as long. A passing
	// adapter takes no longer for it; one that breaks a rule fails anyway.
	// What happened to the adapter in each scenario (its starts, exits and
	// last lines of output) is shown when the run fails: a failure under
	// load in CI is read from this, not reproduced.
	var progress strings.Builder
	defer func() {
		if t.Failed() {
			t.Logf("the kit's progress:\n%s", progress.String())
		}
	}()
	rep, err := conformance.Run(t.Context(), conformance.Options{Adapter: adapter, Capabilities: capabilities, TimeoutScale: 5, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != len(conformance.Names()) {
		t.Fatalf("%d verdicts, want one for each of the %d scenarios", len(rep.Scenarios), len(conformance.Names()))
	}
	for _, r := range rep.Scenarios {
		switch {
		case notApplicable[r.Name] && (!r.NotApplicable || r.Passed):
			t.Errorf("%s: passed %v, not applicable %v (%s); want not applicable to %s", r.Name, r.Passed, r.NotApplicable, r.Detail, capabilities)
		case !notApplicable[r.Name] && !r.Passed:
			t.Errorf("%s failed: %s", r.Name, r.Detail)
		}
	}
	if rep.Failed != 0 || rep.NotApplicable != len(notApplicable) || rep.Passed != len(conformance.Names())-len(notApplicable) {
		t.Errorf("%d passed, %d failed, %d not applicable; want %d, 0, %d",
			rep.Passed, rep.Failed, rep.NotApplicable, len(conformance.Names())-len(notApplicable), len(notApplicable))
	}
	if capabilities == "none" && !slices.Equal(notApplicableNames(rep), scenariosNeedingACapability()) {
		t.Errorf("not applicable to %s: %v; want every scenario that needs a capability, %v", adapter, notApplicableNames(rep), scenariosNeedingACapability())
	}
}

// scenariosNotApplicableTo are the kit's scenarios that need a capability
// not among declared: passesTheKit wants the kit to report exactly these not
// applicable.
func scenariosNotApplicableTo(declared []string) map[string]bool {
	notApplicable := map[string]bool{}
	for _, name := range conformance.Names() {
		needs, _ := conformance.Needs(name)
		for _, n := range needs {
			if !slices.Contains(declared, n) {
				notApplicable[name] = true
			}
		}
	}
	return notApplicable
}

// notApplicableNames are the scenarios rep reports not applicable, in the
// kit's order.
func notApplicableNames(rep conformance.Report) []string {
	var out []string
	for _, r := range rep.Scenarios {
		if r.NotApplicable {
			out = append(out, r.Name)
		}
	}
	return out
}

// scenariosNeedingACapability are the kit's scenarios that need any
// capability, in the kit's order.
func scenariosNeedingACapability() []string {
	var out []string
	for _, name := range conformance.Names() {
		if needs, _ := conformance.Needs(name); len(needs) > 0 {
			out = append(out, name)
		}
	}
	return out
}
