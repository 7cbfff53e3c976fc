package conformance

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary act as an adapter (TestHelperAdapter).
const helperEnv = "BOTHY_CONFORMANCE_HELPER"

// TestHelperAdapter is no test: run by the kit of the tests below (with
// helperEnv set) it is their adapter. It reads the event stream once (a
// GET the proxy counts as agentEvents), then either waits to be ended
// ("wait") or writes a line on stderr and exits 3 ("exit3").
func TestHelperAdapter(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	resp, err := http.Get(os.Getenv(envServer) + "/api/v1/agent/events?wait=1")
	if err == nil {
		resp.Body.Close()
	}
	switch mode {
	case "wait":
		time.Sleep(time.Hour)
	case "exit3":
		fmt.Fprintln(os.Stderr, "adapter of Robin: the model at example.com is gone")
		os.Exit(3)
	}
	os.Exit(0)
}

// helperKit is a kit without a server: its proxy forwards to nowhere,
// which is enough to count the adapter's reads, and its adapter is
// command with env.
func helperKit(t *testing.T, command string, env ...string) *kit {
	t.Helper()
	px, err := newProxy("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	ps := httptest.NewServer(px)
	t.Cleanup(ps.Close)
	k := &kit{ctx: t.Context(), proxy: px, cmd: command, env: append([]string{envServer + "=" + ps.URL}, env...)}
	t.Cleanup(func() { k.stop("the test's end") })
	return k
}

// helperCommand runs this test binary as the adapter TestHelperAdapter.
func helperCommand(t *testing.T) string {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("exec '%s' -test.run='^TestHelperAdapter$'", bin)
}

// TestAdapterCannotStart: an adapter that exits before its first read of
// the event stream is an ExitedError at once, naming its exit status and
// its last line of output, and its exit is recorded as not the kit's.
func TestAdapterCannotStart(t *testing.T) {
	t.Parallel()
	k := helperKit(t, "echo 'Sam was here' >&2; nonexistent-adapter-of-alex")
	started := time.Now()
	err := k.ensureRunning()
	var ex *ExitedError
	if !errors.As(err, &ex) {
		t.Fatalf("ensureRunning = %v, want an ExitedError", err)
	}
	if ex.Exit.Code != 127 || ex.Exit.ByKit || !slices.Contains(ex.Exit.Tail, "Sam was here") {
		t.Fatalf("exit %+v; want status 127, not by the kit, the tail with Sam's line", ex.Exit)
	}
	for _, want := range []string{"exit status 127", "nonexistent-adapter-of-alex: not found", "Sam was here"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	// At once: the exit ends the wait, not FirstReadWait.
	if d := time.Since(started); d >= FirstReadWait {
		t.Errorf("the failure took %s", d)
	}
	if len(k.exits) != 1 {
		t.Fatalf("%d exits recorded, want 1", len(k.exits))
	}
}

// TestExitsAttributed: the kit waits for the adapter's first read at its
// start and again after a restart; its own SIGKILL and its stop are
// recorded as its doing, an exit of the adapter's own with its status and
// its last line.
func TestExitsAttributed(t *testing.T) {
	t.Parallel()
	k := helperKit(t, helperCommand(t), helperEnv+"=wait")
	killRestartStopAndExit(t, k)
	var rep Report
	k.fill(&rep)
	if len(rep.Exits) != 3 || rep.UnexpectedExits != 1 {
		t.Fatalf("exits %+v; want 3, one unexpected", rep.Exits)
	}
	wantKitsExits(t, rep.Exits[0], rep.Exits[1])
	wantAdaptersOwnExit(t, rep.Exits[2])
	if got := k.exitsDuring("answers_once"); !strings.Contains(got, "exit status 3") {
		t.Errorf("a failure's detail would say %q", got)
	}
	events := strings.Join(k.takeEvents(), "\n")
	for _, want := range []string{"adapter start 1: its first read", "adapter exit 1: signal: killed, by the kit's SIGKILL (not a failure)",
		"adapter start 2: its first read", "adapter exit 3: exit status 3, not caused by the kit", "| adapter of Robin: the model at example.com is gone"} {
		if !strings.Contains(events, want) {
			t.Errorf("the progress lines lack %q:\n%s", want, events)
		}
	}
}

// killRestartStopAndExit drives TestExitsAttributed's adapter through its
// three exits: the kit's SIGKILL during crash_during_model (the start and
// the restart each wait for the process's first read), the kit's stop, and
// an exit 3 of the adapter's own during answers_once.
func killRestartStopAndExit(t *testing.T, k *kit) {
	t.Helper()
	if err := k.ensureRunning(); err != nil {
		t.Fatal(err)
	}
	if n := k.streamReads(); n != 1 {
		t.Fatalf("%d reads after the start, want 1", n)
	}
	k.setScenario("crash_during_model")
	k.signal(syscall.SIGKILL)
	if err := k.waitExit(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The restart waits for the new process's read.
	if err := k.ensureRunning(); err != nil {
		t.Fatal(err)
	}
	if n := k.streamReads(); n != 2 {
		t.Fatalf("%d reads after the restart, want 2", n)
	}
	k.setScenario("")
	k.stop("the kit's stop at the end")
	// The adapter of its own accord: a read, a line, exit 3.
	k.env = append(k.env, helperEnv+"=exit3")
	k.setScenario("answers_once")
	if err := k.ensureRunning(); err != nil {
		t.Fatal(err)
	}
	if err := k.waitExit(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// wantKitsExits checks that the kit's SIGKILL and its stop are recorded as
// its doing, each with its cause and the scenario it came in.
func wantKitsExits(t *testing.T, kill, end Exit) {
	t.Helper()
	if !kill.ByKit || kill.Cause != "the kit's SIGKILL" || kill.Signal != "killed" || kill.Scenario != "crash_during_model" {
		t.Errorf("the kit's SIGKILL: %+v", kill)
	}
	if !end.ByKit || end.Cause != "the kit's stop at the end" || end.Scenario != "" {
		t.Errorf("the kit's stop: %+v", end)
	}
}

// wantAdaptersOwnExit checks that the adapter's exit 3 is recorded as its
// own, with its status, its scenario and its last line.
func wantAdaptersOwnExit(t *testing.T, own Exit) {
	t.Helper()
	if own.ByKit || own.Code != 3 || own.Status != "exit status 3" || own.Scenario != "answers_once" ||
		!slices.Contains(own.Tail, "adapter of Robin: the model at example.com is gone") {
		t.Errorf("the adapter's own exit: %+v", own)
	}
}

// TestNoReadNoted: an adapter alive but silent on the event stream (one
// over another path) is let be after the wait with a note, and not waited
// for again after a restart.
func TestNoReadNoted(t *testing.T) {
	t.Parallel()
	k := helperKit(t, "exec sleep 3600")
	k.readWait = 300 * time.Millisecond
	if err := k.ensureRunning(); err != nil {
		t.Fatal(err)
	}
	if len(k.notes) != 1 || !strings.Contains(k.notes[0], "made no read of its event stream") || !strings.Contains(k.notes[0], "300ms") {
		t.Fatalf("notes %q", k.notes)
	}
	k.signal(syscall.SIGKILL)
	if err := k.waitExit(t.Context()); err != nil {
		t.Fatal(err)
	}
	// No second wait: the restart is back before the wait could end.
	k.readWait = time.Hour
	if err := k.ensureRunning(); err != nil {
		t.Fatal(err)
	}
	if len(k.notes) != 1 {
		t.Fatalf("notes %q", k.notes)
	}
}

// TestTail: the tail keeps the last lines, each cut, an unfinished one
// included.
func TestTail(t *testing.T) {
	t.Parallel()
	var tl tail
	for i := range tailLines + 5 {
		fmt.Fprintf(&tl, "line %d\r\n", i)
	}
	fmt.Fprint(&tl, strings.Repeat("x", 2*tailWidth))
	got := tl.last()
	if len(got) != tailLines || got[0] != "line 6" || got[len(got)-2] != fmt.Sprintf("line %d", tailLines+4) {
		t.Fatalf("%q", got)
	}
	if last := got[len(got)-1]; last != strings.Repeat("x", tailWidth)+"…" {
		t.Fatalf("the long line is %d bytes", len(last))
	}
}

// TestEnvironmentDocumented: the kit sets exactly the variables its help
// lists for the adapter.
func TestEnvironmentDocumented(t *testing.T) {
	t.Parallel()
	var set, listed []string
	for _, kv := range adapterEnv("http://127.0.0.1:1", "bothy_a_x", "http://127.0.0.1:2", "/tmp/tools.yaml") {
		set = append(set, strings.SplitN(kv, "=", 2)[0])
	}
	for _, d := range AdapterEnvironment() {
		listed = append(listed, d.Name)
	}
	slices.Sort(set)
	slices.Sort(listed)
	if !slices.Equal(set, listed) {
		t.Fatalf("set %v, listed %v", set, listed)
	}
	var caps []string
	for _, d := range CapabilityLines() {
		caps = append(caps, d.Name)
	}
	if !slices.Equal(caps, Capabilities()) {
		t.Fatalf("capability lines %v, capabilities %v", caps, Capabilities())
	}
}

// TestRestartWithoutRead: an adapter that read after its first start and
// makes no read after a restart fails the scenario that restarted it,
// after the wait.
func TestRestartWithoutRead(t *testing.T) {
	t.Parallel()
	k := helperKit(t, helperCommand(t), helperEnv+"=wait")
	if err := k.ensureRunning(); err != nil {
		t.Fatal(err)
	}
	k.signal(syscall.SIGKILL)
	if err := k.waitExit(t.Context()); err != nil {
		t.Fatal(err)
	}
	k.cmd, k.readWait = "exec sleep 3600", 300*time.Millisecond
	err := k.ensureRunning()
	if !noRead(err) || !strings.Contains(err.Error(), "made no read of its event stream within 300ms") {
		t.Fatalf("ensureRunning = %v; want a noReadError", err)
	}
}
