package graph

import (
	"context"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// liveVerdictTTL bounds how long a subscription trusts its decision on a
// run's thread within one hub generation (as the fan-out does:
// docs/design/rights.md#live-rights).
const liveVerdictTTL = time.Second

// liveVerdict is a subscription's decision on one run's thread.
type liveVerdict struct {
	ok        bool
	channelID string
	gen       <-chan struct{}
	at        time.Time
}

// fresh reports whether v may still be used: within its hub generation and
// liveVerdictTTL.
func (v liveVerdict) fresh() bool {
	if time.Since(v.at) >= liveVerdictTTL {
		return false
	}
	select {
	case <-v.gen:
		return false
	default:
		return true
	}
}

// LiveVerdicts shares the decisions on live boxes among the subscriptions
// of one replica: the readers of a streamed answer who are the same
// principal (as it is now) are decided once per run, hub generation and
// second, by one of them while the others wait for its answer.
type LiveVerdicts struct {
	mu     sync.Mutex
	byKey  map[string]liveVerdict
	flight singleflight.Group
}

// NewLiveVerdicts returns an empty shared cache.
func NewLiveVerdicts() *LiveVerdicts { return &LiveVerdicts{byKey: map[string]liveVerdict{}} }

// decide answers the verdict of principal p on run runID for generation
// gen, from the cache or by fn.
func (c *LiveVerdicts) decide(p identity.Principal, runID string, gen <-chan struct{}, fn func() (liveVerdict, error)) (liveVerdict, error) {
	// The principal as it is now: its status and owner flag are part of
	// every decision.
	key := p.ID + "/" + string(p.Status) + "/" + strconv.FormatBool(p.IsOwner) + "/" + runID
	c.mu.Lock()
	if v, ok := c.byKey[key]; ok && v.gen == gen && v.fresh() {
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()
	res, err, _ := c.flight.Do(key, func() (any, error) {
		v, err := fn()
		if err != nil {
			return liveVerdict{}, err
		}
		c.mu.Lock()
		if len(c.byKey) > 10000 {
			for k, old := range c.byKey {
				if !old.fresh() {
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
	sub := r.Runs.SubscribeLive(queue)
	out := make(chan func(string) (model.Event, bool))
	hub := r.Runs.Hub()
	verdicts := r.Live.Verdicts
	if verdicts == nil {
		verdicts = NewLiveVerdicts()
	}
	// sent is the last version delivered per run: a change the
	// subscription receives again (it came in while the catch-up was
	// read) is not delivered twice.
	sent := map[string]int{}
	visible := func(ctx context.Context, runID string) (liveVerdict, error) {
		gen := hub.Changed()
		p, ok, err := now(ctx)
		if err != nil || !ok {
			return liveVerdict{}, err
		}
		decide := func() (liveVerdict, error) {
			// Shared by the subscriptions waiting for it: one leaving
			// must not cancel the others' decision.
			_, path, err := r.Authz.Authorize(authz.Prepaid(context.WithoutCancel(ctx)), p, authz.RunRead, authz.Resource{Kind: authz.KindRun, ID: runID})
			v := liveVerdict{ok: err == nil, channelID: path.ChannelID, gen: gen, at: time.Now()}
			if err != nil {
				if c := problem.CodeOf(err); c != problem.NotFound && c != problem.Forbidden {
					return liveVerdict{}, err
				}
			}
			return v, nil
		}
		return verdicts.decide(p, runID, gen, decide)
	}
	// stop closes the connection (4413: the client resumes and reads the
	// boxes again) when the reader fell behind or a change could not be
	// decided: a reader never silently misses a change.
	stop := make(chan struct{})
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }) }
	deliver := func(ev runs.LiveEvent) bool {
		if ev.Delta.Version <= sent[ev.RunID] {
			return true
		}
		v, err := visible(ctx, ev.RunID)
		if err != nil {
			if ctx.Err() == nil && r.Live.Log != nil {
				r.Live.Log.WarnContext(ctx, "live box change not decided; the reader reads the box again", "error", err.Error())
			}
			halt()
			return false
		}
		if !v.ok {
			return true
		}
		sent[ev.RunID] = ev.Delta.Version
		build := func(seq string) (model.Event, bool) { return liveEventModel(ev, v.channelID, seq), true }
		select {
		case out <- build:
			return true
		case <-ctx.Done():
			return false
		}
	}
	go func() {
		defer sub.Close()
		for _, c := range from {
			if c == nil {
				continue
			}
			sent[c.RunID] = c.Version
			for _, ev := range sub.Since(c.RunID, c.Version) {
				if !deliver(ev) {
					return
				}
			}
		}
		for {
			select {
			case ev := <-sub.Events():
				if !deliver(ev) {
					return
				}
			case <-sub.Full():
				halt()
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, stop, nil
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
