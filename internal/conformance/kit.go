// Package conformance is the kit behind `bothy conformance`: it starts a
// private Bothy server (an embedded database, the example world, short
// leases) and a scripted fake model that speaks the OpenAI chat
// completions and Anthropic Messages APIs, starts the adapter under test as
// a shell command with the kit's addresses in its environment, and runs
// scenarios of the run contract against it, each passed or failed with a
// reason (docs/adapter.md#checking-an-adapter).
package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"bothy.example.com/bothy/internal/localserver"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/world"
)

// Options configure a run of the kit.
type Options struct {
	// Adapter is the shell command that runs the adapter under test. It
	// reads BOTHY_SERVER, BOTHY_AGENT_TOKEN (the agent Lotse's),
	// BOTHY_MODEL_BASE_URL, BOTHY_MODEL_API_KEY, BOTHY_MODEL_NAME and
	// BOTHY_CONFORMANCE_TOOLS (a tools file, also in BOTHY_TOOLS for the
	// reference adapter): AdapterEnvironment.
	Adapter string
	// Only names the scenarios to run, separated by commas, in the kit's
	// order whatever the order here; empty runs them all.
	Only string
	// Capabilities are what the adapter declares it does, separated by
	// commas: model (it asks a model), live (it streams into the run's
	// live box), tools (it runs the tools of BOTHY_TOOLS), files (it reads
	// attachments). Empty is DefaultCapabilities. A scenario that needs a
	// capability the adapter does not declare is not applicable: reported
	// apart, never passed.
	Capabilities string
	// Progress receives a line per scenario as it ends, and indented
	// below it what happened to the adapter meanwhile: its starts, its
	// exits (with the last lines of its output when the kit did not cause
	// them) and the kit's notes (nil: none).
	Progress io.Writer
	// DatabaseURL names a migrated database for the kit's server instead
	// of a PostgreSQL cluster of the kit's own (its tests pass clones of
	// their shared template: a cluster per run is most of a short run's
	// work). db_outage_recovers stops the kit's cluster, so it cannot run
	// on such a database.
	DatabaseURL string
	// TimeoutScale multiplies every scenario's deadline and the wait for
	// the adapter's first read after a start (0 or 1: as written). Tests
	// that run the kit beside many others on two cores set it, since an
	// adapter's process starts and model calls then take several times as
	// long; an adapter that breaks a rule fails its scenario whatever the
	// deadline.
	TimeoutScale float64
}

// The capabilities an adapter may declare (Options.Capabilities).
const (
	capModel = "model"
	capLive  = "live"
	capTools = "tools"
	capFiles = "files"
	// capAttach: the adapter attaches files to its answers (the kit grants
	// its agent files_out for the scenario).
	capAttach = "attach"
)

// DefaultCapabilities are the capabilities of an adapter that declares
// none: every one but files and attach.
const DefaultCapabilities = capModel + "," + capLive + "," + capTools

// Capabilities are the capabilities the kit knows, in the order the
// documentation lists them.
func Capabilities() []string { return []string{capModel, capLive, capTools, capFiles, capAttach} }

// Result is the verdict on one scenario.
type Result struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	// NotApplicable is set when the scenario needs a capability the
	// adapter did not declare; it did not run and is not passed.
	NotApplicable bool `json:"not_applicable,omitempty"`
	// Detail is "ok", or why the scenario failed, ending with what fixes
	// it ("fix: ...").
	Detail string `json:"detail"`
	// Fix, for a failed scenario, is the configuration or call that
	// fixes it, as the end of Detail says.
	Fix string `json:"fix,omitempty"`
}

// Report is the verdict on every scenario run.
type Report struct {
	Scenarios []Result `json:"scenarios"`
	Passed    int      `json:"passed"`
	Failed    int      `json:"failed"`
	// NotApplicable counts the scenarios left out for a capability the
	// adapter did not declare.
	NotApplicable int `json:"not_applicable"`
	// Exits are the exits of the adapter's processes, in order: those the
	// kit caused (ByKit) and those it did not.
	Exits []Exit `json:"exits"`
	// UnexpectedExits counts the Exits the kit did not cause.
	UnexpectedExits int `json:"unexpected_exits"`
	// Notes are the kit's remarks on the run as a whole (an adapter that
	// never read its event stream).
	Notes []string `json:"notes,omitempty"`
	// Error is why the kit stopped before the end (Run's error), empty
	// when it ran every scenario.
	Error string `json:"error,omitempty"`
}

// missing returns the capabilities of needs that declared lacks.
func missing(needs, declared []string) []string {
	var out []string
	for _, n := range needs {
		if !slices.Contains(declared, n) {
			out = append(out, n)
		}
	}
	return out
}

// parseCapabilities splits a declaration (Options.Capabilities) and checks
// every name; empty is DefaultCapabilities.
func parseCapabilities(decl string) ([]string, error) {
	if strings.TrimSpace(decl) == "" {
		decl = DefaultCapabilities
	}
	var out []string
	for _, c := range strings.Split(decl, ",") {
		c = strings.TrimSpace(c)
		if c == "none" {
			continue
		}
		if !slices.Contains(Capabilities(), c) {
			return nil, fmt.Errorf("conformance: no capability %q (there are %s, or none)", c, strings.Join(Capabilities(), ", "))
		}
		out = append(out, c)
	}
	return out, nil
}

// leaseTimeout is the kit server's run.lease_timeout: short, so that
// renewals and takeovers happen within a scenario.
const leaseTimeout = 2 * time.Second

// kit is the private server, the fake model and the adapter process.
type kit struct {
	srv   *localserver.Server
	model *fakeModel
	mbase string // the fake model's address
	world *world.World
	cmd   string
	// ctx is Run's: the kit's waits end with it.
	ctx context.Context
	// env is the adapter's part of its environment (adapterEnv).
	env []string
	// timeoutScale is Options.TimeoutScale.
	timeoutScale float64

	mu   sync.Mutex
	proc *exec.Cmd
	exit chan struct{}
	// started is set once the adapter was started; readsStream once it
	// was seen reading its event stream, after which every restart waits
	// for its read again.
	started, readsStream bool
	// starts counts the adapter's starts by ensureRunning.
	starts int
	// readWait bounds the wait for the first read after a start
	// (awaitFirstRead); 0 is firstReadWait.
	readWait time.Duration
	// scenario is the scenario that runs, to which exits are attributed.
	scenario string
	// exits are the adapter's exits so far; notes the kit's remarks;
	// events the lines Run's progress tells next.
	exits  []Exit
	notes  []string
	events []string
	// tools is the kit's tools file (toolsFile).
	tools string
	// proxy is the adapter's way to the server (its BOTHY_SERVER).
	proxy    *proxy
	proxyURL string
	// placer counts the reads of agent streams the server placed (nil:
	// a kit without a server of its own, in the kit's tests).
	placer readPlacer
}

// readPlacer is what the kit sees of the server's stream hub: how many
// reads of agent streams it placed (their cursors resolved), and a wait
// for one more (stream.Hub).
type readPlacer interface {
	Placed() int64
	AwaitPlaced(ctx context.Context, n int64) error
}

// toolsFile is the kit's tools file (sdk/httptool's format): two
// consequential tools whose URLs record every call (the fake model's
// side-effect recorder), and a read-only one whose URL serves the page a
// scenario sets. The page tool declares no output_trust: what it returns
// is anyone's words, and unverified is the default an adapter must keep.
const toolsFile = `tools:
  - name: file_ticket
    description: File a ticket in the team's tracker.
    parameters:
      type: object
      properties:
        title: {type: string}
      required: [title]
    consequential: true
    url: %[1]s/file_ticket
  - name: fetch_page
    description: Fetch a web page and return its text.
    parameters:
      type: object
      properties:
        url: {type: string}
      required: [url]
    url: %[2]s
  - name: send_email
    description: Send an email on behalf of the team.
    parameters:
      type: object
      properties:
        to: {type: string}
        body: {type: string}
      required: [body]
    consequential: true
    url: %[1]s/send_email
`

// Names are the scenarios in the order they run.
func Names() []string {
	out := make([]string, len(scenarios))
	for i, s := range scenarios {
		out[i] = s.name
	}
	return out
}

// Needs returns the capabilities scenario name needs to apply (none for a
// scenario every adapter runs), so that a caller can tell which verdicts
// a declaration (Options.Capabilities) leaves out; false when the kit has
// no such scenario.
func Needs(name string) ([]string, bool) {
	s, ok := scenarioByName(name)
	return slices.Clone(s.needs), ok
}

// scenarioByName returns the kit's scenario name; false when it has none.
func scenarioByName(name string) (scenario, bool) {
	for _, s := range scenarios {
		if s.name == name {
			return s, true
		}
	}
	return scenario{}, false
}

// Run starts the kit, runs the scenarios of opts against the adapter and
// returns the verdicts.
//
// Errors: the kit itself cannot start (no PostgreSQL server binaries, no
// free port) or Only names no scenario; a failing scenario is a verdict,
// not an error.
func Run(ctx context.Context, opts Options) (Report, error) {
	chosen, declared, err := choose(opts)
	if err != nil {
		return Report{}, err
	}
	dir, err := os.MkdirTemp("", "bothy-conformance-")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	k, closeKit, err := start(ctx, opts, dir)
	if err != nil {
		return Report{}, err
	}
	defer closeKit()
	defer k.stop("the kit's stop")
	rp := &reporter{k: k, out: opts.Progress}
	for _, s := range chosen {
		if lack := missing(s.needs, declared); len(lack) > 0 {
			rp.add(Result{Name: s.name, NotApplicable: true, Detail: "not applicable: needs " + strings.Join(lack, ", ")})
			continue
		}
		k.setScenario(s.name)
		if err := k.ensureRunning(); err != nil {
			// An adapter that exits before it reads its stream cannot
			// start (and one that cannot be started at all): every
			// scenario would time out the same way. A restart that is
			// only slow to read fails this scenario alone.
			if !noRead(err) {
				return rp.stopped(err)
			}
			rp.add(Result{Name: s.name, Detail: err.Error()})
			rp.tell()
			continue
		}
		// The start's lines come before the scenario's: they happened
		// before its mention.
		rp.tell()
		rp.add(k.runScenario(ctx, s))
		// A scenario's leftovers (a run still active) must not reach the
		// next one.
		k.settle(ctx)
		k.setScenario("")
		rp.tell()
	}
	k.stop("the kit's stop at the end")
	rp.tell()
	k.fill(&rp.rep)
	return rp.rep, nil
}

// choose returns the scenarios opts selects, in the kit's order, and the
// capabilities the adapter declares.
//
// Errors: Only names no scenario, a capability is unknown, or the outage
// scenario is chosen on a database of the caller's.
func choose(opts Options) ([]scenario, []string, error) {
	var chosen []scenario
	names := strings.Split(opts.Only, ",")
	for _, s := range scenarios {
		if opts.Only == "" || slices.Contains(names, s.name) {
			chosen = append(chosen, s)
		}
	}
	for _, n := range names {
		if opts.Only != "" && !slices.Contains(Names(), n) {
			return nil, nil, fmt.Errorf("conformance: no scenario %q (there are %v)", n, Names())
		}
	}
	declared, err := parseCapabilities(opts.Capabilities)
	if err != nil {
		return nil, nil, err
	}
	if opts.DatabaseURL != "" {
		for _, s := range chosen {
			if s.name == outageScenario {
				return nil, nil, fmt.Errorf("conformance: %s stops the kit's own database cluster; it cannot run on Options.DatabaseURL", outageScenario)
			}
		}
	}
	return chosen, declared, nil
}

// start starts the kit's server (a cluster of its own in dir unless
// opts.DatabaseURL names a database: db_outage_recovers stops it and
// starts it again), the example world, the fake model, the adapter's proxy
// and the tools file, and returns the kit with the function that closes
// them.
func start(ctx context.Context, opts Options, dir string) (*kit, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*kit, func(), error) { closeAll(); return nil, nil, err }
	settings := localserver.Unmetered()
	settings[config.RunLeaseTimeout] = leaseTimeout.String()
	settings[config.RunSweepInterval] = "200ms"
	// The kit has no malware scanner: its files are served unscanned.
	settings[config.FilesRequireScan] = "false"
	srv, err := localserver.Start(ctx, localserver.Options{Dir: dir, DatabaseURL: opts.DatabaseURL, Settings: settings})
	if err != nil {
		return fail(err)
	}
	closers = append(closers, srv.Close)
	w, err := world.Build(ctx, world.Of(srv.Server.Modules()))
	if err != nil {
		return fail(err)
	}
	model := newFakeModel()
	mbase, closeModel, err := serveLocal(model)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, closeModel)
	px, err := newProxy(srv.URL)
	if err != nil {
		return fail(err)
	}
	proxyURL, closeProxy, err := serveLocal(px)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, closeProxy)
	k := &kit{srv: srv, model: model, mbase: mbase, world: w, ctx: ctx, timeoutScale: opts.TimeoutScale,
		cmd: opts.Adapter, tools: filepath.Join(dir, "tools.yaml"), proxy: px, proxyURL: proxyURL, placer: srv.Server.Modules().Hub}
	k.env = adapterEnv(k.proxyURL, w.Token("lotse"), k.mbase, k.tools)
	if err := os.WriteFile(k.tools, []byte(fmt.Sprintf(toolsFile, k.mbase+sideEffectPath, k.mbase+pagePath)), 0o600); err != nil {
		return fail(err)
	}
	return k, closeAll, nil
}

// serveLocal serves h on a free port of 127.0.0.1 and returns its base
// address with the function that stops it.
func serveLocal(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// scaled is d multiplied by Options.TimeoutScale when it is above 1: the
// waits of a scenario for what an adapter does in reply stretch with the
// machine's load like the scenario's deadline.
func (k *kit) scaled(d time.Duration) time.Duration {
	if k.timeoutScale > 1 {
		return time.Duration(float64(d) * k.timeoutScale)
	}
	return d
}

// runScenario runs s against the running adapter within its timeout and
// returns its verdict: a failure names the adapter's exits during it and
// what fixes it.
func (k *kit) runScenario(ctx context.Context, s scenario) Result {
	k.model.reset()
	timeout := 20 * time.Second
	if s.timeout > 0 {
		timeout = s.timeout
	}
	timeout = k.scaled(timeout)
	sctx, cancel := context.WithTimeout(ctx, timeout)
	err := s.run(sctx, k)
	cancel()
	k.model.releaseHeld()
	r := Result{Name: s.name, Passed: err == nil, Detail: "ok"}
	if err != nil {
		r.Detail = err.Error() + k.exitsDuring(s.name)
		if s.fix != "" {
			r.Detail += "; fix: " + s.fix
			r.Fix = s.fix
		}
	}
	return r
}

// reporter gathers the verdicts of a run of the kit into its report and
// writes a line for each, and what happened to the adapter, to out (nil:
// nowhere).
type reporter struct {
	k   *kit
	out io.Writer
	rep Report
}

// add counts r and writes its line.
func (rp *reporter) add(r Result) {
	verdict := "passed"
	switch {
	case r.NotApplicable:
		rp.rep.NotApplicable++
		verdict = r.Detail
	case r.Passed:
		rp.rep.Passed++
	default:
		rp.rep.Failed++
		verdict = "FAILED: " + r.Detail
	}
	rp.rep.Scenarios = append(rp.rep.Scenarios, r)
	if rp.out != nil {
		fmt.Fprintf(rp.out, "%-31s %s\n", r.Name, verdict)
	}
}

// tell writes what happened to the adapter since the last line.
func (rp *reporter) tell() {
	for _, e := range rp.k.takeEvents() {
		if rp.out != nil {
			fmt.Fprintf(rp.out, "  %s\n", e)
		}
	}
}

// stopped ends the report of a run the kit could not finish.
func (rp *reporter) stopped(err error) (Report, error) {
	rp.tell()
	rp.k.fill(&rp.rep)
	rp.rep.Error = err.Error()
	return rp.rep, err
}

// setScenario names the scenario that runs ("" between them).
func (k *kit) setScenario(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.scenario = name
}

// fill copies the adapter's exits and the kit's notes into rep.
func (k *kit) fill(rep *Report) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rep.Exits = append([]Exit{}, k.exits...)
	rep.UnexpectedExits = 0
	for _, e := range k.exits {
		if !e.ByKit {
			rep.UnexpectedExits++
		}
	}
	rep.Notes = append([]string(nil), k.notes...)
}

// exitsDuring says, for a failure's detail, how the adapter exited during
// scenario without the kit causing it ("" when it did not).
func (k *kit) exitsDuring(scenario string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var st []string
	for _, e := range k.exits {
		if e.Scenario == scenario && !e.ByKit {
			st = append(st, e.Status)
		}
	}
	if len(st) == 0 {
		return ""
	}
	return fmt.Sprintf(" (the adapter exited %s during the scenario, not by the kit: %s)", times(len(st)), strings.Join(st, ", "))
}

// ensureRunning starts the adapter unless it runs, and then waits for its
// first read of the event stream (awaitFirstRead): an exit before it is an
// ExitedError.
func (k *kit) ensureRunning() error {
	k.mu.Lock()
	if k.proc != nil {
		select {
		case <-k.exit:
		default:
			k.mu.Unlock()
			return nil
		}
	}
	// Counted before the start: any read after it is the new process's,
	// the old one has exited.
	reads, placed := k.streamReads(), k.placedReads()
	cmd, exit, err := k.spawn()
	if err != nil {
		k.mu.Unlock()
		return err
	}
	k.proc, k.exit = cmd, exit
	first, wait := !k.started, !k.started || k.readsStream
	k.started = true
	k.starts++
	k.mu.Unlock()
	if !wait {
		return nil
	}
	return k.awaitFirstRead(exit, firstRead{reads: reads, placed: placed}, first)
}

// placedReads returns how many reads of agent streams the server placed so
// far (0 without a server).
func (k *kit) placedReads() int64 {
	if k.placer == nil {
		return 0
	}
	return k.placer.Placed()
}

// spawn starts one more process of the adapter in a process group of its
// own and returns it with a channel closed when it exited; the exit is
// recorded (noteExit) before the channel closes.
func (k *kit) spawn() (*exec.Cmd, chan struct{}, error) {
	cmd := exec.Command("sh", "-c", k.cmd)
	cmd.Env = append(os.Environ(), k.env...)
	p := &adapterProc{}
	var out io.Writer = &p.out
	// BOTHY_CONFORMANCE_DEBUG shows the adapter's log as it runs.
	if os.Getenv(envKitDebug) != "" {
		out = io.MultiWriter(&p.out, os.Stderr)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// A child that outlives the shell and keeps its output open must not
	// hide the exit: Wait gives up on the output a second after it.
	cmd.WaitDelay = time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("conformance: start the adapter: %w", err)
	}
	procs.Store(cmd, p)
	exit := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		procs.Delete(cmd)
		k.noteExit(exitOf(cmd, p))
		close(exit)
	}()
	return cmd, exit, nil
}

// waitExit waits until the adapter's process exited.
func (k *kit) waitExit(ctx context.Context) error {
	k.mu.Lock()
	exit := k.exit
	k.mu.Unlock()
	select {
	case <-exit:
		return nil
	case <-ctx.Done():
		return errors.New("the adapter did not exit after SIGKILL")
	}
}

// signal sends sig to the adapter's process group; an exit after the
// kit's SIGKILL or SIGTERM is the kit's doing.
func (k *kit) signal(sig syscall.Signal) {
	k.mu.Lock()
	proc := k.proc
	k.mu.Unlock()
	if proc != nil {
		switch sig {
		case syscall.SIGKILL:
			blame(proc, "the kit's SIGKILL")
		case syscall.SIGTERM:
			blame(proc, "the kit's SIGTERM")
		default:
			// Other signals (SIGSTOP, SIGCONT) pause or resume the
			// adapter without ending it: there is no exit to blame.
		}
		_ = syscall.Kill(-proc.Process.Pid, sig)
	}
}

// end stops a process group: SIGTERM, then SIGKILL after 5 s. The exit
// is the kit's doing.
func end(cmd *exec.Cmd, exit chan struct{}) {
	blame(cmd, "the kit's stop")
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exit:
	case <-time.After(5 * time.Second):
		addCause(cmd, "; SIGTERM did not end it within 5 s, the kit's SIGKILL did")
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exit
	}
}

// stop ends the adapter and its children; cause says why, for the
// report of its exit.
func (k *kit) stop(cause string) {
	k.mu.Lock()
	proc, exit := k.proc, k.exit
	k.mu.Unlock()
	if proc != nil {
		blame(proc, cause)
		end(proc, exit)
	}
}

// outage stops the database for d and starts it again on the same folder
// and port.
func (k *kit) outage(ctx context.Context, d time.Duration) error { return k.srv.Outage(ctx, d) }

// importMessage stores a message of origin import in thread, attributed to
// the world's principal who (the server's import path).
func (k *kit) importMessage(ctx context.Context, thread, who, content string) error {
	return k.srv.Import(ctx, thread, k.world.ID(who), content)
}

// settle waits until no run is active, cancelling those left (the kit's
// owner cancels them), so that scenarios do not see each other's runs.
func (k *kit) settle(ctx context.Context) {
	deadline := time.Now().Add(3 * leaseTimeout)
	for time.Now().Before(deadline) {
		runs, err := k.runStates(ctx)
		if err != nil {
			return
		}
		var active []string
		for id, states := range runs {
			switch states[len(states)-1] {
			case "queued", "running", "waiting_input":
				active = append(active, id)
			}
		}
		if len(active) == 0 {
			return
		}
		for _, id := range active {
			_, _ = k.rest(ctx, http.MethodPost, "/api/v1/runs/"+id+"/cancel", "robin", nil, nil)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// gql runs a GraphQL operation as the world's principal who and decodes
// its data into out.
func (k *kit) gql(ctx context.Context, who, query string, vars map[string]any, out any) error {
	return k.srv.GQL(ctx, k.world.Token(who), query, vars, out)
}

// runEvent is a change of a run's state as the event log tells it.
type runEvent struct {
	RunID, ThreadID, State string
}

// runEvents reads every change of a run's state from the event log, as the
// owner sees it, oldest first.
func (k *kit) runEvents(ctx context.Context) ([]runEvent, error) {
	var out []runEvent
	var after any
	for {
		var page struct {
			Events struct {
				Nodes []struct {
					Kind     string `json:"kind"`
					RunID    string `json:"runId"`
					ThreadID string `json:"threadId"`
					State    string `json:"state"`
				} `json:"nodes"`
				PageInfo struct {
					EndCursor   string `json:"endCursor"`
					HasNextPage bool   `json:"hasNextPage"`
				} `json:"pageInfo"`
			} `json:"events"`
		}
		if err := k.gql(ctx, "robin", `query($a: String) { events(first: 100, after: $a) { nodes { kind ... on RunStateChangedEvent { runId threadId state } }
			pageInfo { endCursor hasNextPage } } }`, map[string]any{"a": after}, &page); err != nil {
			return nil, err
		}
		for _, e := range page.Events.Nodes {
			if e.Kind == "RUN_STATE_CHANGED" {
				out = append(out, runEvent{RunID: e.RunID, ThreadID: e.ThreadID, State: strings.ToLower(e.State)})
			}
		}
		if !page.Events.PageInfo.HasNextPage {
			return out, nil
		}
		after = page.Events.PageInfo.EndCursor
	}
}

// runStates returns the states each run went through, oldest first.
func (k *kit) runStates(ctx context.Context) (map[string][]string, error) {
	evs, err := k.runEvents(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range evs {
		out[e.RunID] = append(out[e.RunID], e.State)
	}
	return out, nil
}

// runOf returns the run started in thread, "" while there is none.
func (k *kit) runOf(ctx context.Context, thread string) string {
	evs, err := k.runEvents(ctx)
	if err != nil {
		return ""
	}
	for _, e := range evs {
		if e.ThreadID == thread {
			return e.RunID
		}
	}
	return ""
}

// runView is a run as the owner reads it.
type runView struct {
	State     string  `json:"state"`
	EndReason *string `json:"endReason"`
	Attempt   int     `json:"attempt"`
}

// run reads run as the owner.
func (k *kit) run(ctx context.Context, run string) (runView, error) {
	var out struct {
		Run *runView `json:"run"`
	}
	if err := k.gql(ctx, "robin", `query($id: ID!) { run(id: $id) { state endReason attempt } }`, map[string]any{"id": run}, &out); err != nil {
		return runView{}, err
	}
	if out.Run == nil {
		return runView{}, errors.New("the run is unreadable")
	}
	out.Run.State = strings.ToLower(out.Run.State)
	return *out.Run, nil
}

// rest calls the kit server as the world's principal who and decodes the
// answer into out; it returns the status.
func (k *kit) rest(ctx context.Context, method, path, who string, body, out any) (int, error) {
	return k.srv.REST(ctx, method, path, k.world.Token(who), body, out)
}

// until polls cond every 100 ms until it holds or ctx ends.
func until(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return errors.New("timed out waiting for " + what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
