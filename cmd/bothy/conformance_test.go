package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/conformance"
	"bothy.example.com/bothy/internal/devtools/gobuild"
)

// brokenAdapter is the conformance kit's single-fault adapter (-break).
const brokenAdapter = "bothy.example.com/bothy/internal/conformance/testdata/broken"

// TestConformanceCommand runs bothy conformance as a user does, the binary
// with its private server and fake model, against three adapters: the
// reference adapter passes two scenarios (exit status 0 and the summary
// line); an adapter that puts the context into the system message fails
// its scenario with what fixes it (exit status 1), in the progress lines
// and in --json; an adapter command that cannot start stops the kit at
// once with its exit status 127 and its shell's "not found" line.
func TestConformanceCommand(t *testing.T) {
	t.Parallel()
	bothy := gobuild.Binary(t, gobuild.Bothy)
	broken := gobuild.Binary(t, brokenAdapter)
	env := withoutBothyEnv(os.Environ())
	t.Run("correct adapter", func(t *testing.T) { conformancePasses(t, bothy, env) })
	t.Run("single fault", func(t *testing.T) { conformanceFails(t, bothy, broken, env) })
	t.Run("single fault, --json", func(t *testing.T) { conformanceFailsJSON(t, bothy, broken, env) })
	t.Run("adapter that cannot start", func(t *testing.T) { conformanceCannotStart(t, bothy, env) })
}

// conformancePasses: the reference adapter (bothy agent run on the kit's
// environment) passes answers_once and trigger_reaches_model, and the
// command says so in a verdict line each and the summary, with status 0.
func conformancePasses(t *testing.T, bothy string, env []string) {
	t.Parallel()
	stdout, stderr, code := runCmd(t, bothy, env, "conformance", "--adapter", bothy+" agent run --model openai",
		"--only", "answers_once,trigger_reaches_model")
	if code != 0 || stderr != "" {
		t.Fatalf("exit status %d, stderr %q; want 0 and nothing\n%s", code, stderr, stdout)
	}
	for _, want := range []string{"answers_once                    passed\n", "trigger_reaches_model           passed\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
	// The kit's stop at the end is the adapter's one exit.
	if want := "2 passed, 0 failed, 0 not applicable; the adapter exited once, 0 of them not caused by the kit\n"; !strings.HasSuffix(stdout, want) {
		t.Errorf("the output does not end with the summary %q:\n%s", want, stdout)
	}
}

// untrustedFix is the start of untrusted_not_in_system's fix as the kit
// prints it after "fix:".
const untrustedFix = "keep the context out of the system message"

// conformanceFails: the adapter that moves the context into the system
// message (-break untrusted) fails untrusted_not_in_system, whose line
// names it and ends with its fix, passes the control answers_once, and the
// command exits 1 with the count of failures.
func conformanceFails(t *testing.T, bothy, broken string, env []string) {
	t.Parallel()
	stdout, stderr, code := runCmd(t, bothy, env, "conformance", "--adapter", broken+" -break untrusted",
		"--only", "untrusted_not_in_system,answers_once")
	if code != 1 {
		t.Fatalf("exit status %d; want 1\n%s%s", code, stdout, stderr)
	}
	var line string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "untrusted_not_in_system ") {
			line = l
		}
	}
	if !strings.Contains(line, " FAILED: the message of ") || !strings.Contains(line, "reached a system message; fix: "+untrustedFix) {
		t.Errorf("the verdict line %q does not say what failed and what fixes it:\n%s", line, stdout)
	}
	for _, want := range []string{"answers_once                    passed\n",
		"1 passed, 1 failed, 0 not applicable; the adapter exited once, 0 of them not caused by the kit\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
	if want := "bothy: 1 of 2 scenarios failed\n"; stderr != want {
		t.Errorf("stderr %q; want %q", stderr, want)
	}
}

// conformanceFailsJSON: with --json the same failure is a report whose
// verdict carries the fix in Result.Fix and at the end of its detail, and
// stdout holds that document alone.
func conformanceFailsJSON(t *testing.T, bothy, broken string, env []string) {
	t.Parallel()
	stdout, stderr, code := runCmd(t, bothy, env, "conformance", "--json", "--adapter", broken+" -break untrusted",
		"--only", "untrusted_not_in_system")
	if code != 1 {
		t.Fatalf("exit status %d; want 1\n%s%s", code, stdout, stderr)
	}
	var rep conformance.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is no report: %v\n%s", err, stdout)
	}
	if rep.Failed != 1 || rep.Passed != 0 || len(rep.Scenarios) != 1 {
		t.Fatalf("report %+v; want one failed verdict", rep)
	}
	r := rep.Scenarios[0]
	if r.Name != "untrusted_not_in_system" || !strings.HasPrefix(r.Fix, untrustedFix) || !strings.HasSuffix(r.Detail, "; fix: "+r.Fix) {
		t.Errorf("verdict %+v; want untrusted_not_in_system with its fix in fix and at the end of detail", r)
	}
}

// conformanceCannotStart: an adapter command the shell cannot find stops
// the kit before any scenario, saying the exit status 127 and the shell's
// line, with status 1 (a failure, not a usage error), soon after the
// adapter's start rather than after the kit's wait for a first read.
func conformanceCannotStart(t *testing.T, bothy string, env []string) {
	t.Parallel()
	// The mark's time is the adapter's start: the kit's own start (its
	// database cluster) takes what it takes on a loaded machine.
	mark := filepath.Join(t.TempDir(), "started")
	stdout, stderr, code := runCmd(t, bothy, env, "conformance", "--adapter", fmt.Sprintf(": > %s; nonexistent-adapter-of-sam --help", mark),
		"--only", "answers_once")
	st, err := os.Stat(mark)
	if err != nil {
		t.Fatalf("the adapter never started: %v\n%s%s", err, stdout, stderr)
	}
	// A kit that missed the exit would wait for a first read that never
	// comes, and then time out in every scenario.
	if d := time.Since(st.ModTime()); d >= conformance.FirstReadWait {
		t.Errorf("the command ended %s after the adapter's start; an exit must end the wait for a first read (%s)", d, conformance.FirstReadWait)
	}
	if code != 1 {
		t.Errorf("exit status %d; want 1", code)
	}
	for _, want := range []string{"adapter exit 1: exit status 127, not caused by the kit", "nonexistent-adapter-of-sam: not found"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
	for _, want := range []string{"bothy: conformance: the adapter (sh -c ", "exited before its first read of the event stream: exit status 127",
		"nonexistent-adapter-of-sam: not found"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	// No scenario ran, so none timed out.
	if strings.Contains(stdout, "answers_once") || strings.Contains(stdout, " passed, ") {
		t.Errorf("a scenario ran:\n%s", stdout)
	}
}
