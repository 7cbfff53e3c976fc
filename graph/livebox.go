package graph

import (
	"context"
	"strconv"
	"sync"

	"golang.org/x/sync/singleflight"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/verdicts"
	"bothy.example.com/bothy/internal/runs"
)

// liveVerdict is a subscription's decision on one run's thread, used
// within its hub generation and verdicts.TTL of the clock (as the fan-out
// does: docs/design/rights.md#live-rights).
type liveVerdict struct {
	ok        bool
	channelID string
	win       verdicts.Window[<-chan struct{}]
}

// LiveVerdicts shares the decisions on live boxes among the subscriptions
// of one replica: the readers of a streamed answer who are the same
// principal (as it is now) are decided once per run, hub generation and
// second, by one of them while the others wait for its answer.
type LiveVerdicts struct {
	clock  clock.Clock
	mu     sync.Mutex
	byKey  map[string]liveVerdict
	flight singleflight.Group
}

// NewLiveVerdicts returns an empty shared cache on clock c (the wall clock
// when nil).
func NewLiveVerdicts(c clock.Clock) *LiveVerdicts {
	if c == nil {
		c = clock.Real{}
	}
	return &LiveVerdicts{clock: c, byKey: map[string]liveVerdict{}}
}

// decide answers the verdict of principal p on run runID for generation
// gen, from the cache or by fn.
func (c *LiveVerdicts) decide(p identity.Principal, runID string, gen <-chan struct{}, fn func() (liveVerdict, error)) (liveVerdict, error) {
	// The principal as it is now: its status and owner flag are part of
	// every decision.
	key := p.ID + "/" + string(p.Status) + "/" + strconv.FormatBool(p.IsOwner) + "/" + runID
	c.mu.Lock()
	if v, ok := c.byKey[key]; ok && v.win.Fresh(gen, c.clock.Now()) {
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()
	res, err, _ := c.flight.Do(key, func() (any, error) {
		v, err := fn()
		if err != nil {
			return liveVerdict{}, err
		}
		v.win = verdicts.Taken(gen, c.clock)
		c.mu.Lock()
		if len(c.byKey) > 10000 {
			now := c.clock.Now()
			for k, old := range c.byKey {
				if !old.win.Fresh(old.win.Gen(), now) {
					delete(c.byKey, k)
				}
			}
		}
		c.byKey[key] = v
		c.mu.Unlock()
		return v, nil
	})
	if err != nil {
		return liveVerdict{}, err
	}
	return res.(liveVerdict), nil
}

// liveSide returns the side source of an events subscription: the changes
// of the live boxes on this replica that the caller may read now (decided
// with the caller as it is now, per run, again after every commit and at
// least every second), first those after the versions of from, then each
// as it happens, none twice. full is closed when the caller fell behind.
func (r *Resolver) liveSide(ctx context.Context, now func(context.Context) (identity.Principal, bool, error),
	from []*model.LiveCursor) (<-chan func(string) (model.Event, bool), <-chan struct{}, error) {
	for i, c := range from {
		if c.Version < 0 {
			return nil, nil, problem.Invalid(problem.FieldError{Pointer: "liveFrom/" + strconv.Itoa(i) + "/version", Code: "out_of_range", Detail: "0 or more"})
		}
	}
	queue := r.Live.SendQueue
	if queue < 1 {
		queue = 1
	}
	verdicts := r.Live.Verdicts
	if verdicts == nil {
		verdicts = NewLiveVerdicts(nil)
	}
	ls := &liveStream{r: r, now: now, sub: r.Runs.SubscribeLive(queue), hub: r.Runs.Hub(), verdicts: verdicts,
		out: make(chan func(string) (model.Event, bool)), stop: make(chan struct{}), sent: map[string]int{}}
	go ls.run(ctx, from)
	return ls.out, ls.stop, nil
}

// liveStream is one subscription's stream of box changes: what it has
// delivered, and how it decides and stops.
type liveStream struct {
	r        *Resolver
	now      func(context.Context) (identity.Principal, bool, error)
	sub      *runs.LiveSubscription
	hub      *runs.Hub
	verdicts *LiveVerdicts
	out      chan func(string) (model.Event, bool)
	// stop is closed (the connection then closes with 4413: the client
	// resumes and reads the boxes again) when the reader fell behind or a
	// change could not be decided: a reader never silently misses a change.
	stop chan struct{}
	once sync.Once
	// sent is the last version delivered per run: a change the
	// subscription receives again (it came in while the catch-up was
	// read) is not delivered twice.
	sent map[string]int
}

// run delivers the changes after the cursors of from, then each change as
// it comes, until the reader falls behind or leaves.
func (ls *liveStream) run(ctx context.Context, from []*model.LiveCursor) {
	defer ls.sub.Close()
	for _, c := range from {
		if c == nil {
			continue
		}
		ls.sent[c.RunID] = c.Version
		for _, ev := range ls.sub.Since(c.RunID, c.Version) {
			if !ls.deliver(ctx, ev) {
				return
			}
		}
	}
	for {
		select {
		case ev := <-ls.sub.Events():
			if !ls.deliver(ctx, ev) {
				return
			}
		case <-ls.sub.Full():
			ls.halt()
			return
		case <-ctx.Done():
			return
		}
	}
}

// halt closes stop once.
func (ls *liveStream) halt() { ls.once.Do(func() { close(ls.stop) }) }

// deliver sends ev to the reader when it is new to it and the reader may
// read its run now; it reports whether the stream goes on.
func (ls *liveStream) deliver(ctx context.Context, ev runs.LiveEvent) bool {
	if ev.Delta.Version <= ls.sent[ev.RunID] {
		return true
	}
	v, err := ls.visible(ctx, ev.RunID)
	if err != nil {
		if ctx.Err() == nil && ls.r.Live.Log != nil {
			ls.r.Live.Log.WarnContext(ctx, "live box change not decided; the reader reads the box again", "error", err.Error())
		}
		ls.halt()
		return false
	}
	if !v.ok {
		return true
	}
	ls.sent[ev.RunID] = ev.Delta.Version
	build := func(seq string) (model.Event, bool) { return liveEventModel(ev, v.channelID, seq), true }
	select {
	case ls.out <- build:
		return true
	case <-ctx.Done():
		return false
	}
}

// visible decides whether the reader, as it is now, may read run runID:
// one decision shared by the subscriptions of the same principal for the
// same run and generation (LiveVerdicts).
func (ls *liveStream) visible(ctx context.Context, runID string) (liveVerdict, error) {
	gen := ls.hub.Changed()
	p, ok, err := ls.now(ctx)
	if err != nil || !ok {
		return liveVerdict{}, err
	}
	decide := func() (liveVerdict, error) {
		// Shared by the subscriptions waiting for it: one leaving must not
		// cancel the others' decision.
		_, path, err := ls.r.Authz.Authorize(authz.Prepaid(context.WithoutCancel(ctx)), p, authz.RunRead, authz.Resource{Kind: authz.KindRun, ID: runID})
		v := liveVerdict{ok: err == nil, channelID: path.ChannelID}
		if err != nil {
			if c := problem.CodeOf(err); c != problem.NotFound && c != problem.Forbidden {
				return liveVerdict{}, err
			}
		}
		return v, nil
	}
	return ls.verdicts.decide(p, runID, gen, decide)
}

// liveEventModel is the GraphQL object of a box change delivered after the
// log event seq.
func liveEventModel(ev runs.LiveEvent, channelID, seq string) *model.RunLiveUpdatedEvent {
	d := ev.Delta
	payload := map[string]any{"run_id": ev.RunID, "message_id": ev.MessageID, "thread_id": ev.ThreadID, "version": d.Version,
		"append": d.Append, "status": d.Status, "done": d.Done}
	if d.Replace != nil {
		payload["replace"] = *d.Replace
	}
	return &model.RunLiveUpdatedEvent{EventBase: model.EventBase{Seq: seq, Type: string(events.RunLiveUpdated), CreatedAt: d.At,
		ChannelID: channelID, Payload: payload}, RunID: ev.RunID, MessageID: ev.MessageID, ThreadID: ev.ThreadID,
		Version: d.Version, Append: d.Append, Replace: d.Replace, Status: d.Status, Done: d.Done}
}
