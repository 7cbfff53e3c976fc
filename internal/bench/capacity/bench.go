// Package capacity is `bothy bench capacity`: a load generator that finds
// the highest sustained load one installation carries. Written with the
// project's own client code (the Go SDK's GraphQL client for posting, its
// agent.Run for the agent, graphql-transport-ws for the listeners, as the
// web client subscribes), it ramps people posting, listeners subscribed
// and agent runs answered, step by step (Search), and reports the highest
// step at which no request failed, every message reached every listener,
// every run was answered and the p99 from a message's commit to its
// arrival at the last listener stayed within the limit (250 ms), with the
// CPU each process used and, with the server's profiles
// (metrics.pprof), where the server spent it (docs/performance.md).
package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"bothy.example.com/bothy/internal/world"
	"bothy.example.com/bothy/sdk/agent"
)

// The world's roles in the benchmark: writer may write but not trigger in
// Support/Allgemein (its posts start no run), alex may trigger there and
// asks the agent, lotse is Support's operator agent; all four people read
// the channel.
const (
	place  = "Support/Allgemein"
	poster = "writer"
	asker  = "alex"
	agentH = "lotse"
)

var listenerPeople = []string{"alex", "sam", "robin", "writer"}

// Options configure Run.
type Options struct {
	// Server is the base URL of the server under load.
	Server string
	// World holds the example world's tokens (bothy dev's world.json).
	World *world.World
	// Base is level 1; level k is k times it (default 2 messages/s, 40
	// listeners, 1 run/s).
	Base Step
	// MaxLevel is the highest level tried (default 64).
	MaxLevel int
	// StepDuration is how long each level is held (default 15 s).
	StepDuration time.Duration
	// Grace is how long after a step its deliveries and answers may still
	// arrive (default 5 s); a message later than that is lost.
	Grace time.Duration
	// P99Limit is the highest p99 a held step may have (default 250 ms).
	P99Limit time.Duration
	// SubsPerConn is the events subscriptions per connection (default 1).
	SubsPerConn int
	// PprofURL is the server's metrics listener with metrics.pprof on; a
	// CPU profile of each step is taken from it (empty: none).
	PprofURL string
	// ServerPid and DatabasePid are the processes whose CPU is sampled
	// (with their children); 0: not sampled.
	ServerPid, DatabasePid int
	// ProfileDir keeps the profile of the bottleneck's step (default the
	// temporary directory).
	ProfileDir string
	// Progress receives a line per step (nil: none).
	Progress io.Writer
}

func (o *Options) defaults() {
	if o.Base == (Step{}) {
		o.Base = Step{Messages: 2, Listeners: 40, Runs: 1}
	}
	o.MaxLevel = cmpOr(o.MaxLevel, 64)
	o.StepDuration = cmpOr(o.StepDuration, 15*time.Second)
	o.Grace = cmpOr(o.Grace, 5*time.Second)
	o.P99Limit = cmpOr(o.P99Limit, 250*time.Millisecond)
	o.SubsPerConn = cmpOr(o.SubsPerConn, 1)
	o.ProfileDir = cmpOr(o.ProfileDir, os.TempDir())
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// cmpOr is v, or def when v is zero.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// bench is one run: the clients, the listeners and the counters.
type bench struct {
	opts          Options
	poster, asker *agent.Client
	thread        string
	arr           *arrivals
	conns         []*conn
	seq           atomic.Int64
	asked         atomic.Int64
	answered      atomic.Int64

	mu       sync.Mutex
	failures int
	first    string
}

// fail records a failed request or a broken listener.
func (b *bench) fail(what string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.first == "" {
		b.first = what
	}
}

// takeFailures returns and resets the failures since the last call.
func (b *bench) takeFailures() (int, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, f := b.failures, b.first
	b.failures, b.first = 0, ""
	return n, f
}

// Run ramps the load on opts.Server and reports the highest sustained
// step and the first bottleneck.
//
// Errors: the world lacks a principal or the channel; ctx ends. A level
// whose listeners cannot connect or receive is a failed level.
func Run(ctx context.Context, opts Options) (Report, error) {
	opts.defaults()
	b, err := newBench(opts)
	if err != nil {
		return Report{}, err
	}
	actx, stopAgent := context.WithCancel(ctx)
	agentDone := make(chan error, 1)
	go func() { agentDone <- b.serveAgent(actx) }()
	defer func() {
		stopAgent()
		<-agentDone
		b.resize(ctx, 0)
	}()
	rep := Report{Setup: Setup{Server: opts.Server, Poster: poster, Asker: asker, Agent: agentH, ListenerPeople: listenerPeople,
		SubsPerConn: opts.SubsPerConn, Base: opts.Base, MaxLevel: opts.MaxLevel, StepDuration: opts.StepDuration, P99Limit: opts.P99Limit, Place: place}}
	s := Search{Max: opts.MaxLevel}
	profiles := map[int]stepProfile{}
	for k, ok := s.Next(); ok; k, ok = s.Next() {
		r, prof, err := b.step(ctx, k)
		if err != nil {
			return rep, err
		}
		Judge(&r, opts.P99Limit)
		s.Record(k, r.Passed)
		rep.Steps = append(rep.Steps, r)
		profiles[k] = prof
		fmt.Fprintf(opts.Progress, "level %d: %.1f msgs/s, %d listeners, %.1f runs/s, p99 %s, %v %s\n", k, r.Messages, r.Target.Listeners, r.Runs, ms(r.P99), r.Passed, r.Why)
	}
	rep.Best, rep.Bottleneck = conclude(rep.Steps, s, profiles)
	return rep, nil
}

// newBench checks the world and makes the clients.
func newBench(opts Options) (*bench, error) {
	w := opts.World
	for _, h := range append([]string{poster, asker, agentH}, listenerPeople...) {
		if _, ok := w.Principals[h]; !ok {
			return nil, fmt.Errorf("the world has no %s: run against bothy dev's example world (world.json)", h)
		}
	}
	ch, ok := w.Channels[place]
	if !ok || ch.MainThreadID == "" {
		return nil, fmt.Errorf("the world has no channel %s", place)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}}
	b := &bench{opts: opts, thread: ch.MainThreadID, arr: newArrivals()}
	var err error
	if b.poster, err = agent.NewClient(opts.Server, w.Token(poster), agent.ClientOptions{HTTPClient: hc}); err != nil {
		return nil, err
	}
	b.asker, err = agent.NewClient(opts.Server, w.Token(asker), agent.ClientOptions{HTTPClient: hc})
	return b, err
}

// serveAgent answers the agent's runs with one SDK adapter in this
// process, echoing the question (no model time), until ctx ends.
func (b *bench) serveAgent(ctx context.Context) error {
	err := agent.Run(ctx, agent.Config{Server: b.opts.Server, Token: b.opts.World.Token(agentH), MaxConcurrent: 64,
		OnRunDone: func(r agent.RunReport) {
			if r.Err != nil || r.Outcome != agent.OutcomeCompleted {
				b.fail(fmt.Sprintf("run %s ended %s: %v", r.RunID, r.Outcome, r.Err))
			}
		}},
		func(ctx context.Context, t *agent.Task) error {
			if err := t.Answer(ctx, "echo: "+t.Context().TriggerMessage.ContentMD); err != nil {
				return err
			}
			b.answered.Add(1)
			return nil
		})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
