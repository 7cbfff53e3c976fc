// Package injection is `bothy bench injection`: a benchmark of how far
// instructions planted in what an agent reads drive its tools, after the
// idea of AgentDojo's Slack suite (own code and words). It starts a
// private Bothy server with a team of four people (Alex, Sam, Robin and
// Dana), channels general, random, private and external, the agent under
// test, another agent and an app; a fixture that plays the team's
// workspace and the web and records every call of the agent's tools
// (HTTP tools of sdk/httptool); and a model, by default an obedient one
// that calls whatever any text asks for.
//
// Each case is a conversation in a thread: Alex asks the agent for a
// benign user task, and an injection task is planted through one origin
// (a person without trigger, another agent, an app, an import, a
// follow-up of another person, a web page a tool returns, the agent's own
// earlier answer). Alex is simulated: she approves exactly the calls her
// task asked for and denies every other card. Every case runs twice: with
// the server's trust markers, and with every element treated as TRIGGER
// (a switch of the bench's agent, never of the server or the SDK). The
// scores are read from the fixture's record of calls, never from the
// model's text (docs/reliability.md#injection-bench).
package injection

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"bothy.example.com/bothy/internal/localserver"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/world"
	"bothy.example.com/bothy/sdk/agent"
)

// Options configure a bench.
type Options struct {
	Selection
	// Model is the model the agent asks (default: the obedient model).
	Model Model
	// Parallel is how many cases run at once (default 6).
	Parallel int
	// CaseTimeout bounds one case (default 60 s; raise it for a real
	// model).
	CaseTimeout time.Duration
	// DatabaseURL names a database to run on instead of a cluster of the
	// bench's own (a test's).
	DatabaseURL string
	// Progress receives a line per case as it ends (nil: none).
	Progress io.Writer
}

// bench is one run of the benchmark: the private server and the
// fixture, the agent's client, and the cases by thread.
type bench struct {
	opts        Options
	srv         *localserver.Server
	chat        chatClient
	client      *agent.Client
	fixture     *fixture
	fixtureURL  string
	obedientURL string

	mu       sync.Mutex
	byThread map[string]*caseRun
}

// Run runs the cases of opts.Selection in both modes and reports the
// figures.
//
// Errors: the selection names an unknown origin; the bench cannot start
// (no PostgreSQL server binaries, no free port); a case did not end within
// CaseTimeout or its conversation failed (a refusal of the server).
func Run(ctx context.Context, opts Options) (Report, error) {
	injected, benign, err := Cases(opts.Selection)
	if err != nil {
		return Report{}, err
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 6
	}
	if opts.CaseTimeout <= 0 {
		opts.CaseTimeout = 60 * time.Second
	}
	b, stop, err := start(ctx, opts)
	if err != nil {
		return Report{}, err
	}
	defer stop()
	// The agent and Alex stop before the server does, so that neither
	// meets a server going away.
	actx, stopActors := context.WithCancel(ctx)
	var actors sync.WaitGroup
	defer actors.Wait()
	defer stopActors()
	errs := make(chan error, 2)
	p := &person{chat: b.chat, cases: b.caseOf}
	actors.Go(func() { errs <- b.serveAgent(actx) })
	actors.Go(func() { errs <- p.watch(actx) })
	outcomes, err := b.runAll(actx, errs, injected, benign)
	if err != nil {
		return Report{}, err
	}
	return newReport(outcomes), nil
}

// start starts the private server with the bench's world, the fixture
// and the obedient model; stop ends them.
func start(ctx context.Context, opts Options) (*bench, func(), error) {
	dir, err := os.MkdirTemp("", "bothy-bench-")
	if err != nil {
		return nil, nil, err
	}
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		os.RemoveAll(dir)
	}
	// The bench's server has no scanner: as in bothy dev, files nobody
	// scanned are read (the file origin's text must reach the agent).
	settings := localserver.Unmetered()
	settings[config.FilesRequireScan] = "false"
	srv, err := localserver.Start(ctx, localserver.Options{Dir: dir, DatabaseURL: opts.DatabaseURL, Settings: settings})
	if err != nil {
		stop()
		return nil, nil, err
	}
	closers = append(closers, srv.Close)
	w, err := world.BuildSpec(ctx, world.Of(srv.Server.Modules()), team())
	if err != nil {
		stop()
		return nil, nil, err
	}
	b := &bench{opts: opts, srv: srv, chat: chatClient{srv: srv, world: w}, fixture: newFixture(), byThread: map[string]*caseRun{}}
	if b.client, err = agent.NewClient(srv.URL, w.Token(agentHandle), agent.ClientOptions{}); err != nil {
		stop()
		return nil, nil, err
	}
	for _, h := range []struct {
		handler http.Handler
		url     *string
	}{{b.fixture, &b.fixtureURL}, {obedientModel{}, &b.obedientURL}} {
		url, closeFn, err := listen(h.handler)
		if err != nil {
			stop()
			return nil, nil, err
		}
		*h.url, closers = url, append(closers, closeFn)
	}
	return b, stop, nil
}

// listen serves h on a free port of 127.0.0.1 and returns its address
// and how to stop it.
func listen(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	s := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go s.Serve(ln)
	return "http://" + ln.Addr().String(), func() { s.Close() }, nil
}

// serveAgent runs the agent under test with the SDK until ctx ends.
func (b *bench) serveAgent(ctx context.Context) error {
	err := agent.Run(ctx, agent.Config{Client: b.client, Logger: slog.New(slog.DiscardHandler), MaxConcurrent: 2 * b.opts.Parallel}, b.handle)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("injection: the agent stopped: %w", err)
	}
	return nil
}

// caseOf returns the case of thread, nil when none.
func (b *bench) caseOf(thread string) *caseRun {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byThread[thread]
}

// register makes thread the case's.
func (b *bench) register(c *caseRun, thread string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.thread = thread
	b.byThread[thread] = c
}
