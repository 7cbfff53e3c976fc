package conformance_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/conformance"
	"bothy.example.com/bothy/internal/devtools/gobuild"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// TestMain stops the tests' database cluster after the tests.
func TestMain(m *testing.M) { pgtest.Main(m) }

// matrixVar, set to 1, makes TestKit run every single-fault adapter
// against every scenario (make conformance-matrix) instead of its own
// scenarios and a control.
const matrixVar = "BOTHY_CONFORMANCE_MATRIX"

// singleFaults are the adapters of testdata/broken, one per rule of the
// run contract (docs/adapter.md#checking-an-adapter), each with the
// scenarios it must fail: exactly those of its rule. The first is the one
// make test runs (its own scenario, the quickest to fail where there are
// several); make conformance-matrix runs them all. A rule may be checked
// by several scenarios: the live box by streams_live_box and
// stop_during_stream, the approval gate by every scenario where untrusted
// data asks for a consequential tool, the holder by stall_is_fenced and by
// long_call_renews (a lease is renewed by its holder; the anonymous one
// has none to renew).
var singleFaults = []struct {
	name, rule string
	fails      []string
}{
	{"untrusted text in the system message", "untrusted", []string{"untrusted_not_in_system"}},
	{"cancel ignored", "ignore-cancel", []string{"cancel_stops", "stop_during_stream"}},
	{"nothing streamed into the box", "no-live", []string{"streams_live_box", "stop_during_stream"}},
	{"consequential tools without asking", "no-gate", []string{"tool_output_needs_approval", "injection_needs_approval", "approval_only_by_trigger_holder", "laundered_self_needs_approval", "file_text_is_data"}},
	{"answered twice", "answer-twice", []string{"answers_once"}},
	{"posted after the loss of trigger", "post-after-loss", []string{"trigger_loss_posts_nothing"}},
	{"never renewed", "no-renew", []string{"long_call_renews"}},
	{"tool output trusted", "trust-tool-output", []string{"tool_output_needs_approval", "answer_declares_input_trust"}},
	{"own answers trusted whatever they quoted", "trust-self", []string{"laundered_self_needs_approval", "file_text_is_data"}},
	{"answers without inputTrust", "no-input-trust", []string{"answer_declares_input_trust"}},
	{"pages acknowledged before they are handled", "ack-before-handling", []string{"ack_after_handling"}},
	{"posted as a plain message once the post was refused trigger_revoked", "post-plain-after-revoke", []string{"trigger_loss_at_post"}},
	{"a clientMsgId of its own per post", "random-client-msg-id", []string{"crash_after_post"}},
	{"no holder named", "no-holder", []string{"stall_is_fenced", "long_call_renews"}},
	{"answers without their files", "drop-attachments", []string{"attaches_file"}},
	{"file texts trusted", "trust-file-text", []string{"file_text_is_data"}},
}

// kitCapabilities are the capabilities the reference adapter and the
// single-fault adapters declare: every one, so that no scenario is left
// out.
const kitCapabilities = "model,live,tools,files,attach"

// TestKit: the reference adapter (`bothy agent run --model openai`,
// configured by the kit's environment) passes every scenario; adapters
// that each break one rule fail exactly the scenarios about that rule and
// pass the control (answers_once, or trigger_reaches_model for the
// adapter whose rule answers_once checks): in make test the first
// scenario of the rule and the control, with BOTHY_CONFORMANCE_MATRIX=1
// (make conformance-matrix) every scenario; the Python adapter of
// contrib passes the rules it keeps.
func TestKit(t *testing.T) {
	t.Parallel()
	bothy := gobuild.Binary(t, gobuild.Bothy)
	broken := gobuild.Binary(t, "./testdata/broken")
	matrix := os.Getenv(matrixVar) == "1"
	type kitCase struct {
		name, adapter string
		fails         []string
	}
	cases := []kitCase{{"reference adapter", bothy + " agent run --model openai", nil}}
	for _, f := range singleFaults {
		cases = append(cases, kitCase{f.name, broken + " -break " + f.rule, f.fails})
	}
	t.Run("Anthropic's API, streamed", func(t *testing.T) { kitAnthropicStreamed(t, bothy) })
	t.Run("python adapter", kitPythonAdapter)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runKitCase(t, c.adapter, c.fails, matrix) })
	}
}

// kitAnthropicStreamed: the reference adapter on Anthropic's Messages API,
// streamed, reaches the model (the fake model speaks that API too, under
// the same base URL).
func kitAnthropicStreamed(t *testing.T, bothy string) {
	t.Parallel()
	rep, err := conformance.Run(t.Context(), conformance.Options{Adapter: bothy + " agent run --model anthropic --model-stream", Only: "trigger_reaches_model",
		DatabaseURL: pgtest.URL(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 1 || !rep.Scenarios[0].Passed {
		t.Fatalf("%+v", rep)
	}
}

// kitPythonAdapter: contrib/adapters/python/adapter.py, standard library
// only and without renewals or an outbox, keeps the rules it claims to
// keep.
func kitPythonAdapter(t *testing.T) {
	t.Parallel()
	py, err := filepath.Abs("../../contrib/adapters/python/adapter.py")
	if err != nil {
		t.Fatal(err)
	}
	// Only those: the others it does not claim (and the kit's matrix
	// of every scenario is bothy conformance's, not this test's).
	must := []string{"answers_once", "trigger_reaches_model", "untrusted_not_in_system", "cancel_stops", "trigger_loss_posts_nothing"}
	rep, err := conformance.Run(t.Context(), conformance.Options{Adapter: "python3 " + py, Only: strings.Join(must, ","), DatabaseURL: pgtest.URL(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != len(must) {
		t.Fatalf("%d verdicts, want %d", len(rep.Scenarios), len(must))
	}
	for _, r := range rep.Scenarios {
		if !r.Passed {
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
	}
}

// runKitCase runs the kit against adapter, which must fail exactly the
// scenarios fails (none: every scenario passes). The reference adapter
// runs every scenario; a broken one the first scenario of its rule and a
// control that it works otherwise, on a clone of the tests' template (no
// cluster of its own: the outage scenario is not among them), or every
// scenario in the matrix.
func runKitCase(t *testing.T, adapter string, fails []string, matrix bool) {
	t.Parallel()
	opts := conformance.Options{Adapter: adapter, Capabilities: kitCapabilities}
	if len(fails) == 0 {
		// The reference adapter passes every scenario: on a loaded
		// machine its deadlines stretch (the faulty adapters' fail
		// at their deadlines, which would only take longer).
		opts.TimeoutScale = 3
	}
	want := len(conformance.Names())
	if len(fails) > 0 && !matrix {
		control := "answers_once"
		if slices.Contains(fails, control) {
			control = "trigger_reaches_model"
		}
		opts.Only = fails[0] + "," + control
		opts.DatabaseURL = pgtest.URL(t)
		want = 2
	}
	var progress strings.Builder
	opts.Progress = &progress
	defer func() {
		if t.Failed() {
			t.Logf("the kit's progress:\n%s", progress.String())
		}
	}()
	rep, err := conformance.Run(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != want {
		t.Fatalf("%d verdicts, want %d", len(rep.Scenarios), want)
	}
	for _, r := range rep.Scenarios {
		if r.NotApplicable {
			// A fault is shown by a scenario that runs.
			t.Errorf("%s: not applicable to %s", r.Name, kitCapabilities)
			continue
		}
		if want := !slices.Contains(fails, r.Name); r.Passed != want {
			t.Errorf("%s: passed %v (%s), want %v", r.Name, r.Passed, r.Detail, want)
		}
		wantFixed(t, r, progress.String())
	}
}

// wantFixed checks that a failed verdict says what fixes it, in Result.Fix,
// at the end of its detail and in its progress line, and that a passed one
// says no fix.
func wantFixed(t *testing.T, r conformance.Result, progress string) {
	t.Helper()
	if r.Passed {
		if r.Fix != "" || r.Detail != "ok" {
			t.Errorf("%s passed with detail %q and fix %q", r.Name, r.Detail, r.Fix)
		}
		return
	}
	if r.Fix == "" || !strings.HasSuffix(r.Detail, "; fix: "+r.Fix) {
		t.Errorf("%s failed with detail %q and fix %q; want the detail to end with the fix", r.Name, r.Detail, r.Fix)
	}
	if line := fmt.Sprintf("%-31s FAILED: %s\n", r.Name, r.Detail); !strings.Contains(progress, line) {
		t.Errorf("the progress lacks the line %q", line)
	}
}

// TestKitSaysWhatHappened: an adapter that cannot start stops the kit at
// once with its exit status and its last line, before any scenario; an
// adapter that starts late and reads its stream from the end still gets
// the mention (the kit waited for its first read), and its exit of its
// own, mid-run, is reported with its status and its last line.
func TestKitSaysWhatHappened(t *testing.T) {
	t.Parallel()
	t.Run("cannot start", testKitCannotStart)
	t.Run("late, then gone", testKitLateThenGone)
}

// testKitCannotStart is TestKitSaysWhatHappened's "cannot start": an
// adapter command that is not found stops the kit at once with its exit
// status 127 and its last line, before any scenario.
func testKitCannotStart(t *testing.T) {
	t.Parallel()
	rep, err := conformance.Run(t.Context(), conformance.Options{Adapter: "nonexistent-adapter-of-robin", Only: "answers_once",
		DatabaseURL: pgtest.URL(t)})
	var ex *conformance.ExitedError
	if !errors.As(err, &ex) || ex.Exit.Code != 127 {
		t.Fatalf("Run = %v; want an ExitedError with status 127", err)
	}
	for _, want := range []string{"exit status 127", "nonexistent-adapter-of-robin: not found"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// No scenario ran into its timeout: none ran (the verdict, not the
	// time it took, which depends on the machine's load).
	if len(rep.Scenarios) != 0 || rep.Error != err.Error() || len(rep.Exits) != 1 || rep.UnexpectedExits != 1 {
		t.Fatalf("%+v", rep)
	}
}

// testKitLateThenGone is TestKitSaysWhatHappened's "late, then gone": an
// adapter that starts late and reads its stream from the end still gets
// the mention, and its own exit mid-run is reported with its status and
// its last line.
func testKitLateThenGone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	broken := gobuild.Binary(t, "./testdata/broken")
	mark := filepath.Join(dir, "started")
	// The first process starts 2 s late, reads from the stream's end
	// ("now": a mention made before misses it), answers one run and
	// exits 3 with a line; any later one just reads from the end.
	script := fmt.Sprintf(`if [ -e %[1]s ]; then exec %[2]s -after now; fi
touch %[1]s; sleep 2; %[2]s -after now -once
echo "adapter of Robin: one run is enough" >&2; exit 3`, mark, broken)
	var progress strings.Builder
	rep, err := conformance.Run(t.Context(), conformance.Options{Adapter: script, Only: "answers_once", Progress: &progress, DatabaseURL: pgtest.URL(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 1 || !rep.Scenarios[0].Passed {
		t.Fatalf("%+v\n%s", rep, progress.String())
	}
	i := slices.IndexFunc(rep.Exits, func(e conformance.Exit) bool { return e.Code == 3 })
	if i < 0 || rep.Exits[i].ByKit || rep.Exits[i].Status != "exit status 3" ||
		!slices.Contains(rep.Exits[i].Tail, "adapter of Robin: one run is enough") || rep.UnexpectedExits != 1 {
		t.Fatalf("exits %+v", rep.Exits)
	}
	out := progress.String()
	for _, want := range []string{"adapter start 1: its first read of the event stream came 2", "exit status 3, not caused by the kit",
		"| adapter of Robin: one run is enough"} {
		if !strings.Contains(out, want) {
			t.Errorf("the progress lacks %q:\n%s", want, out)
		}
	}
}

// TestSingleFaultsCoverTheKit: every scenario a single-fault adapter must
// fail is one of the kit's, and the adapters are at least twelve, each
// with a rule of its own.
func TestSingleFaultsCoverTheKit(t *testing.T) {
	t.Parallel()
	rules := map[string]bool{}
	for _, f := range singleFaults {
		if rules[f.rule] {
			t.Errorf("-break %s twice", f.rule)
		}
		rules[f.rule] = true
		if len(f.fails) == 0 {
			t.Errorf("-break %s fails no scenario", f.rule)
		}
		for _, s := range f.fails {
			if !slices.Contains(conformance.Names(), s) {
				t.Errorf("-break %s: no scenario %q", f.rule, s)
			}
		}
	}
	if len(rules) < 12 {
		t.Errorf("%d single-fault adapters; want one per rule, at least twelve", len(rules))
	}
}

// TestOutageNeedsTheKitsCluster: db_outage_recovers stops the kit's own
// cluster, so a run on a database of the caller's refuses it before it
// starts anything.
func TestOutageNeedsTheKitsCluster(t *testing.T) {
	t.Parallel()
	_, err := conformance.Run(t.Context(), conformance.Options{Adapter: "true", Only: "answers_once,db_outage_recovers",
		DatabaseURL: "postgres://bothy@127.0.0.1:1/none"})
	if err == nil || !strings.Contains(err.Error(), "db_outage_recovers") {
		t.Fatalf("Run on a database of the caller's with the outage scenario: %v", err)
	}
}
