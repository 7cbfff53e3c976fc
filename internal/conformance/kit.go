// Package conformance is the kit behind `bothy conformance`: it starts a
// private Bothy server (an embedded database, the example world, short
// leases) and a scripted fake model that speaks the OpenAI chat
// completions and Anthropic Messages APIs, starts the adapter under test as
// a shell command with the kit's addresses in its environment, and runs
// scenarios of the run contract against it, each passed or failed with a
// reason (docs/adapter.md#checking-an-adapter).
package conformance

import (
	"bytes"
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
	// reference adapter).
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
	// Progress receives a line per scenario as it ends (nil: none).
	Progress io.Writer
	// DatabaseURL names a migrated database for the kit's server instead
	// of a PostgreSQL cluster of the kit's own (its tests pass clones of
	// their shared template: a cluster per run is most of a short run's
	// work). db_outage_recovers stops the kit's cluster, so it cannot run
	// on such a database.
	DatabaseURL string
}

// The capabilities an adapter may declare (Options.Capabilities).
const (
	capModel = "model"
	capLive  = "live"
	capTools = "tools"
	capFiles = "files"
)

// DefaultCapabilities are the capabilities of an adapter that declares
// none: every one but files.
const DefaultCapabilities = capModel + "," + capLive + "," + capTools

// Capabilities are the capabilities the kit knows, in the order the
// documentation lists them.
func Capabilities() []string { return []string{capModel, capLive, capTools, capFiles} }

// Result is the verdict on one scenario.
type Result struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	// NotApplicable is set when the scenario needs a capability the
	// adapter did not declare; it did not run and is not passed.
	NotApplicable bool   `json:"not_applicable,omitempty"`
	Detail        string `json:"detail"`
}

// Report is the verdict on every scenario run.
type Report struct {
	Scenarios []Result `json:"scenarios"`
	Passed    int      `json:"passed"`
	Failed    int      `json:"failed"`
	// NotApplicable counts the scenarios left out for a capability the
	// adapter did not declare.
	NotApplicable int `json:"not_applicable"`
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

	mu   sync.Mutex
	proc *exec.Cmd
	logs bytes.Buffer
	exit chan struct{}
	// tools is the kit's tools file (toolsFile).
	tools string
	// proxy is the adapter's way to the server (its BOTHY_SERVER).
	proxy    *proxy
	proxyURL string
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
	for _, s := range scenarios {
		if s.name == name {
			return slices.Clone(s.needs), true
		}
	}
	return nil, false
}

// Run starts the kit, runs the scenarios of opts against the adapter and
// returns the verdicts.
//
// Errors: the kit itself cannot start (no PostgreSQL server binaries, no
// free port) or Only names no scenario; a failing scenario is a verdict,
// not an error.
func Run(ctx context.Context, opts Options) (Report, error) {
	var chosen []scenario
	names := strings.Split(opts.Only, ",")
	for _, s := range scenarios {
		if opts.Only == "" || slices.Contains(names, s.name) {
			chosen = append(chosen, s)
		}
	}
	for _, n := range names {
		if opts.Only != "" && !slices.Contains(Names(), n) {
			return Report{}, fmt.Errorf("conformance: no scenario %q (there are %v)", n, Names())
		}
	}
	declared, err := parseCapabilities(opts.Capabilities)
	if err != nil {
		return Report{}, err
	}
	if opts.DatabaseURL != "" {
		for _, s := range chosen {
			if s.name == outageScenario {
				return Report{}, fmt.Errorf("conformance: %s stops the kit's own database cluster; it cannot run on Options.DatabaseURL", outageScenario)
			}
		}
	}
	dir, err := os.MkdirTemp("", "bothy-conformance-")
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	settings := localserver.Unmetered()
	settings[config.RunLeaseTimeout] = leaseTimeout.String()
	settings[config.RunSweepInterval] = "200ms"
	// A cluster of its own, not a database of the caller's:
	// db_outage_recovers stops it and starts it again.
	srv, err := localserver.Start(ctx, localserver.Options{Dir: dir, DatabaseURL: opts.DatabaseURL, Settings: settings})
	if err != nil {
		return Report{}, err
	}
	defer srv.Close()
	w, err := world.Build(ctx, srv.Server.World())
	if err != nil {
		return Report{}, err
	}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Report{}, err
	}
	model := newFakeModel()
	msrv := &http.Server{Handler: model}
	go msrv.Serve(mln)
	defer msrv.Close()

	px, err := newProxy(srv.URL)
	if err != nil {
		return Report{}, err
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Report{}, err
	}
	psrv := &http.Server{Handler: px}
	go psrv.Serve(pln)
	defer psrv.Close()

	k := &kit{srv: srv, model: model, mbase: "http://" + mln.Addr().String(), world: w,
		cmd: opts.Adapter, tools: filepath.Join(dir, "tools.yaml"), proxy: px, proxyURL: "http://" + pln.Addr().String()}
	if err := os.WriteFile(k.tools, []byte(fmt.Sprintf(toolsFile, k.mbase+sideEffectPath, k.mbase+pagePath)), 0o600); err != nil {
		return Report{}, err
	}
	defer k.stop()
	var rep Report
	for _, s := range chosen {
		if lack := missing(s.needs, declared); len(lack) > 0 {
			r := Result{Name: s.name, NotApplicable: true, Detail: "not applicable: needs " + strings.Join(lack, ", ")}
			rep.NotApplicable++
			rep.Scenarios = append(rep.Scenarios, r)
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "%-31s %s\n", s.name, r.Detail)
			}
			continue
		}
		if err := k.ensureRunning(); err != nil {
			return rep, err
		}
		k.model.reset()
		timeout := 20 * time.Second
		if s.timeout > 0 {
			timeout = s.timeout
		}
		sctx, scancel := context.WithTimeout(ctx, timeout)
		err := s.run(sctx, k)
		scancel()
		k.model.releaseHeld()
		r := Result{Name: s.name, Passed: err == nil, Detail: "ok"}
		if err != nil {
			r.Detail = err.Error()
			rep.Failed++
		} else {
			rep.Passed++
		}
		rep.Scenarios = append(rep.Scenarios, r)
		if opts.Progress != nil {
			verdict := "passed"
			if !r.Passed {
				verdict = "FAILED: " + r.Detail
			}
			fmt.Fprintf(opts.Progress, "%-31s %s\n", s.name, verdict)
		}
		// A scenario's leftovers (a run still active) must not reach the
		// next one.
		k.settle(ctx)
	}
	return rep, nil
}

// ensureRunning starts the adapter unless it runs.
func (k *kit) ensureRunning() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc != nil {
		select {
		case <-k.exit:
		default:
			return nil
		}
	}
	cmd, exit, err := k.spawn()
	if err != nil {
		return err
	}
	k.proc, k.exit = cmd, exit
	return nil
}

// spawn starts one more process of the adapter in a process group of its
// own and returns it with a channel closed when it exited.
func (k *kit) spawn() (*exec.Cmd, chan struct{}, error) {
	cmd := exec.Command("sh", "-c", k.cmd)
	cmd.Env = append(os.Environ(), "BOTHY_SERVER="+k.proxyURL, "BOTHY_AGENT_TOKEN="+k.world.Token("lotse"),
		"BOTHY_MODEL_BASE_URL="+k.mbase+"/v1", "BOTHY_MODEL_API_KEY=conformance-key", "BOTHY_MODEL_NAME=conformance-model",
		"BOTHY_CONFORMANCE_TOOLS="+k.tools, "BOTHY_TOOLS="+k.tools)
	cmd.Stdout, cmd.Stderr = &k.logs, &k.logs
	// BOTHY_CONFORMANCE_DEBUG shows the adapter's log as it runs.
	if os.Getenv("BOTHY_CONFORMANCE_DEBUG") != "" {
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("conformance: start the adapter: %w", err)
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
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

// signal sends sig to the adapter's process group.
func (k *kit) signal(sig syscall.Signal) {
	k.mu.Lock()
	proc := k.proc
	k.mu.Unlock()
	if proc != nil {
		_ = syscall.Kill(-proc.Process.Pid, sig)
	}
}

// end stops a process group: SIGTERM, then SIGKILL after 5 s.
func end(cmd *exec.Cmd, exit chan struct{}) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exit:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exit
	}
}

// stop ends the adapter and its children.
func (k *kit) stop() {
	k.mu.Lock()
	proc, exit := k.proc, k.exit
	k.mu.Unlock()
	if proc != nil {
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
