package feed

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/tracing"
)

// The fan-out of the events subscription (docs/design/rights.md#live-rights,
// docs/performance.md "Fan-out"): each replica reads the new events of the
// log once per commit, and decides them for every listening connection at
// once, from the rights as the database holds them after that commit, in
// a fixed number of statements (the connections' tokens, the events'
// paths, the grants of all listeners on them). What a commit costs no
// longer grows with the number of listeners. A listener behind the shared
// window, or a replica whose LISTEN connection is down (no commit would
// reach it), reads and decides alone, as before (Next with the listener's
// own statements).

// The attributes of the fan-out's decision span (feed.fanout): how many
// events it decided for how many listeners.
const (
	fanoutEventsKey    = attribute.Key("bothy.feed.events")
	fanoutListenersKey = attribute.Key("bothy.feed.listeners")
)

// Waker tells the fan-out that something committed: runs.Hub.
type Waker interface {
	// Changed returns a channel closed at the next commit on any replica;
	// the channel stands for the current generation of the database.
	Changed() <-chan struct{}
	// Connected reports whether commits reach this replica (its LISTEN
	// connection is up).
	Connected() bool
}

// Tokens re-authenticates the tokens of the open connections together,
// once per generation: identity.LiveTokens.
type Tokens interface {
	Add(tok string)
	Remove(tok string)
	Check(ctx context.Context, gen <-chan struct{}, tok string) (identity.Principal, bool, error)
}

// FanoutWindow and FanoutWindowBytes bound the newest events the fan-out
// keeps, by count and by their estimated memory (eventBytes): a listener
// further behind reads alone until it caught up. A burst of commits larger
// than the bytes empties the window: every listener then reads alone, at
// its consumer's pace, instead of the replica holding the burst.
const (
	FanoutWindow      = 4096
	FanoutWindowBytes = 2 << 20
)

// Fanout is a replica's shared reader and decider of the events
// subscription. It is safe for concurrent use.
type Fanout struct {
	svc    *Service
	hub    Waker
	tokens Tokens
	clock  clock.Clock

	mu        sync.Mutex
	listeners map[*Listener]struct{}

	// readMu serializes the window's refresh; the window itself is
	// guarded by mu.
	readMu sync.Mutex
	read   <-chan struct{} // the generation the window was read at
	base   int64           // the window holds the events after base
	tail   int64           // up to tail
	window []events.Event
	bytes  int // eventBytes of the window

	// decideMu serializes decisions: the listeners of one commit wait for
	// one batch instead of each deciding alone.
	decideMu  sync.Mutex
	decided   <-chan struct{} // the generation of verdicts
	decidedAt time.Time       // when they were first decided (clock)
	verdicts  map[int64]map[*Listener]bool
	// shared are the reads of the generation that every listener of an
	// event shares (Delivery.Shared), by key.
	shared map[string]*sharedRead
}

// NewFanout returns the fan-out of svc's events, woken by hub, with the
// listeners' tokens checked by tokens and the age of verdicts told by c.
func NewFanout(svc *Service, hub Waker, tokens Tokens, c clock.Clock) *Fanout {
	return &Fanout{svc: svc, hub: hub, tokens: tokens, clock: c, listeners: map[*Listener]struct{}{}}
}

// Listener is one events subscription in the fan-out.
type Listener struct {
	f     *Fanout
	start identity.Principal
	token string
}

// Listen registers a subscription of principal p whose connection
// authenticated with token ("" when there is none: it is decided as p
// stands at the start). Close it when the subscription ends.
func (f *Fanout) Listen(p identity.Principal, token string) *Listener {
	l := &Listener{f: f, start: p, token: token}
	if token != "" {
		f.tokens.Add(token)
	}
	f.mu.Lock()
	f.listeners[l] = struct{}{}
	f.mu.Unlock()
	return l
}

// Close removes the listener from the fan-out.
func (l *Listener) Close() {
	l.f.mu.Lock()
	delete(l.f.listeners, l)
	l.f.mu.Unlock()
	if l.token != "" {
		l.f.tokens.Remove(l.token)
	}
}

// Next returns up to max events after the cursor after that the listener
// may see now, from the shared window, the cursor to continue from (past
// the events it examined, seen or not) and whether more may follow. ok is
// false when the window cannot answer (the cursor lies before it, or
// commits do not reach this replica): the caller reads alone (Service.Next).
//
// Errors: a malformed cursor (invalid_cursor); a database error.
func (l *Listener) Next(ctx context.Context, after string, max int) (evs []events.Event, next string, more, ok bool, err error) {
	f := l.f
	if !f.hub.Connected() {
		return nil, "", false, false, nil
	}
	cursor, valid := events.ParseCursor(after)
	if !valid {
		return nil, "", false, false, problem.Invalid(problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
	}
	gen := f.hub.Changed()
	if err := f.refresh(ctx, gen); err != nil {
		return nil, "", false, false, err
	}
	f.mu.Lock()
	if cursor < f.base {
		f.mu.Unlock()
		return nil, "", false, false, nil
	}
	var pending []events.Event
	for _, e := range f.window {
		if e.Seq > cursor {
			pending = append(pending, e)
		}
	}
	f.mu.Unlock()
	if len(pending) == 0 {
		return nil, after, false, true, nil
	}
	verdicts, err := f.decide(ctx, gen, pending)
	if err != nil {
		return nil, "", false, false, err
	}
	next = after
	for i, e := range pending {
		if len(evs) == max {
			return evs, next, i < len(pending), true, nil
		}
		if verdicts[i][l] {
			evs = append(evs, e)
		}
		next = strconv.FormatInt(e.Seq, 10)
	}
	return evs, next, false, true, nil
}

// Visible says whether the listener may see e now, decided with every
// other listener's question about e since the last commit. ok is false
// when commits do not reach this replica: the caller decides alone
// (Service.Visible).
//
// Errors: a database error.
func (l *Listener) Visible(ctx context.Context, e events.Event) (visible, ok bool, err error) {
	if !l.f.hub.Connected() {
		return false, false, nil
	}
	verdicts, err := l.f.decide(ctx, l.f.hub.Changed(), []events.Event{e})
	if err != nil {
		return false, false, err
	}
	return verdicts[0][l], true, nil
}

// refresh reads the events committed since the window was last read, once
// per generation for all listeners, and keeps the newest FanoutWindow.
func (f *Fanout) refresh(ctx context.Context, gen <-chan struct{}) error {
	f.readMu.Lock()
	defer f.readMu.Unlock()
	f.mu.Lock()
	done, tail, started := f.read == gen, f.tail, f.read != nil
	f.mu.Unlock()
	if done {
		return nil
	}
	// The read every listener shares, once per commit, in the request of
	// whichever connection came first.
	ctx, span := tracing.Start(ctx, "feed.fanout.read", trace.SpanKindInternal)
	defer span.End()
	if !started {
		end, err := f.svc.log.End(ctx)
		if err != nil {
			return problem.Internal("feed.fanout", err)
		}
		tail = end
		f.mu.Lock()
		f.base, f.tail = end, end
		f.mu.Unlock()
	}
	var fresh []events.Event
	size := 0
	for {
		evs, err := f.svc.log.AfterIn(ctx, tail, f.svc.limitMax, true, nil, nil, nil)
		if err != nil {
			return problem.Internal("feed.fanout", err)
		}
		for _, e := range evs {
			size += eventBytes(e)
		}
		fresh = append(fresh, evs...)
		if len(evs) > 0 {
			tail = evs[len(evs)-1].Seq
		}
		if size > FanoutWindowBytes || len(fresh) > FanoutWindow {
			// A burst: keep nothing, start again at the end of the log.
			end, err := f.svc.log.End(ctx)
			if err != nil {
				return problem.Internal("feed.fanout", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.window, f.bytes, f.base, f.tail, f.read = nil, 0, end, end, gen
			return nil
		}
		if len(evs) < f.svc.limitMax {
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.window = append(f.window, fresh...)
	f.bytes += size
	cut := 0
	for cut < len(f.window) && (len(f.window)-cut > FanoutWindow || f.bytes > FanoutWindowBytes) {
		f.bytes -= eventBytes(f.window[cut])
		cut++
	}
	if cut > 0 {
		f.base = f.window[cut-1].Seq
		f.window = append([]events.Event(nil), f.window[cut:]...)
	}
	f.tail, f.read = tail, gen
	return nil
}

// eventBytes estimates the memory an event keeps: its struct and ids, and
// the strings of its payload with a share for each value.
func eventBytes(e events.Event) int {
	var walk func(v any) int
	walk = func(v any) int {
		switch x := v.(type) {
		case string:
			return 16 + len(x)
		case map[string]any:
			n := 48
			for k, y := range x {
				n += 16 + len(k) + walk(y)
			}
			return n
		case []any:
			n := 24
			for _, y := range x {
				n += walk(y)
			}
			return n
		default:
			return 16
		}
	}
	return 256 + walk(e.Payload)
}

// decide returns, for each event of evs, which listeners may see it in
// generation gen. Verdicts are kept for the generation; an event some
// listener has no verdict on yet is decided for every listener at once,
// with the tokens of all of them authenticated in the same batch.
func (f *Fanout) decide(ctx context.Context, gen <-chan struct{}, evs []events.Event) ([]map[*Listener]bool, error) {
	f.decideMu.Lock()
	defer f.decideMu.Unlock()
	// Verdicts answer for their generation, and for at most
	// identity.VerdictTTL of the clock: a grant's expiry passes without a
	// commit.
	if now := f.clock.Now(); f.decided != gen || now.Sub(f.decidedAt) >= identity.VerdictTTL || now.Before(f.decidedAt) {
		f.decided, f.verdicts, f.decidedAt, f.shared = gen, map[int64]map[*Listener]bool{}, now, map[string]*sharedRead{}
	}
	f.mu.Lock()
	listeners := make([]*Listener, 0, len(f.listeners))
	for l := range f.listeners {
		listeners = append(listeners, l)
	}
	f.mu.Unlock()
	var todo []events.Event
	for _, e := range evs {
		v, seen := f.verdicts[e.Seq]
		complete := seen
		for _, l := range listeners {
			if _, has := v[l]; !has {
				complete = false
				break
			}
		}
		if !complete {
			todo = append(todo, e)
		}
	}
	if len(todo) > 0 {
		if err := f.decideAll(ctx, gen, listeners, todo); err != nil {
			return nil, err
		}
	}
	out := make([]map[*Listener]bool, len(evs))
	for i, e := range evs {
		out[i] = f.verdicts[e.Seq]
	}
	return out, nil
}

// decideAll decides evs for every listener of listeners and stores the
// verdicts: the tokens of all connections are checked in one statement
// for the generation (Tokens), the events in those of decideMany.
func (f *Fanout) decideAll(ctx context.Context, gen <-chan struct{}, listeners []*Listener, evs []events.Event) error {
	// One span for the decision every listener shares: it runs in the
	// request of whichever connection asked first, and its statements are
	// below it.
	ctx, span := tracing.Start(ctx, "feed.fanout", trace.SpanKindInternal)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(fanoutEventsKey.Int(len(evs)), fanoutListenersKey.Int(len(listeners)))
	}
	// The listeners whose connection still authenticates as the principal
	// it started with, as that principal is now; the others see nothing.
	var actors []identity.Principal
	var of []*Listener
	for _, l := range listeners {
		p := l.start
		if l.token != "" {
			held, ok, err := f.tokens.Check(ctx, gen, l.token)
			if err != nil {
				return err
			}
			if !ok || held.ID != l.start.ID {
				continue
			}
			p = held
		}
		actors = append(actors, p)
		of = append(of, l)
	}
	keep, err := f.svc.decideMany(ctx, actors, evs)
	if err != nil {
		return err
	}
	for j, e := range evs {
		v := make(map[*Listener]bool, len(listeners))
		for _, l := range listeners {
			v[l] = false
		}
		for i, l := range of {
			v[l] = keep[i][j]
		}
		f.verdicts[e.Seq] = v
	}
	return nil
}

// decideMany decides, as filter does for one reader, which events of evs
// each of actors may read now: out[i][j] for actors[i] and evs[j]. Its
// statements do not depend on the number of actors.
func (s *Service) decideMany(ctx context.Context, actors []identity.Principal, evs []events.Event) ([][]bool, error) {
	t, err := s.targetsOf(ctx, evs)
	if err != nil {
		return nil, err
	}
	keepChan, err := s.authz.FilterMany(ctx, actors, authz.MessageRead, t.channel)
	if err != nil {
		return nil, problem.Internal("feed.decideMany", err)
	}
	keepSpace := make([][]bool, len(actors))
	if len(t.space) > 0 {
		if keepSpace, err = s.authz.FilterMany(ctx, actors, authz.SpaceRead, t.space); err != nil {
			return nil, problem.Internal("feed.decideMany", err)
		}
	}
	out := make([][]bool, len(actors))
	for a := range actors {
		out[a] = make([]bool, len(evs))
		for j, i := range t.inChannel {
			out[a][i] = keepChan[a][j]
		}
		for j, i := range t.ofSpace {
			out[a][i] = keepSpace[a][j]
		}
	}
	return out, nil
}

// Delivery is an event as the fan-out hands it to one listener.
type Delivery struct {
	Listener *Listener
	Event    events.Event
}

// Deliver returns e as the fan-out hands it to l.
func (l *Listener) Deliver(e events.Event) *Delivery { return &Delivery{Listener: l, Event: e} }

// sharedRead is one read of a generation that its listeners share.
type sharedRead struct {
	done chan struct{}
	v    any
	err  error
}

// Shared returns the value of key for the listener, read once by load for
// every listener of the event in this generation, when the listener may
// see the event now (the fan-out's verdict is the decision of the read);
// nil when it may not. handled is false when the fan-out cannot answer
// (commits do not reach this replica): the caller reads alone, with its
// own decision. load runs without the caller's cancellation, since other
// listeners wait for it.
//
// Errors: a database error of the verdict or of load.
func (d *Delivery) Shared(ctx context.Context, key string, load func(context.Context) (any, error)) (v any, handled bool, err error) {
	visible, ok, err := d.Listener.Visible(ctx, d.Event)
	if err != nil || !ok {
		return nil, ok, err
	}
	if !visible {
		return nil, true, nil
	}
	f := d.Listener.f
	f.decideMu.Lock()
	r := f.shared[key]
	if r == nil {
		r = &sharedRead{done: make(chan struct{})}
		f.shared[key] = r
		f.decideMu.Unlock()
		r.v, r.err = load(context.WithoutCancel(ctx))
		if r.err != nil {
			f.decideMu.Lock()
			if f.shared[key] == r {
				delete(f.shared, key)
			}
			f.decideMu.Unlock()
		}
		close(r.done)
	} else {
		f.decideMu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
	}
	return r.v, true, r.err
}
