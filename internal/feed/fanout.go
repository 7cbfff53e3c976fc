package feed

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/tracing"
	"bothy.example.com/bothy/internal/platform/verdicts"
)

// The fan-out of the events subscription (docs/design/rights.md#live-rights,
// docs/performance.md "Fan-out"): each replica reads the new events of the
// log once per commit, and decides them for every listening connection at
// once, in a fixed number of statements (the connections' tokens, the
// events' paths, the grants of all listeners' principals on them). Its
// verdicts are kept per (principal, place) across commits until the
// window reads a change of rights (fanout_verdicts.go), so what a commit
// costs grows neither with the number of listeners nor with how far
// delivery lags behind the commits. A listener behind the shared window,
// or a replica whose LISTEN connection is down (no commit would reach
// it), reads and decides alone, as before (Next with the listener's own
// statements).

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

	// rights counts the changes of rights the window has read (mu): the
	// verdicts answer for one count (rightsEvent). touched counts the
	// events that may change what the shared reads hold (touchesReads).
	rights, touched uint64

	// vmu guards the verdicts only; it is never held while a decision
	// reads the database or a listener is written to.
	vmu      sync.Mutex
	vWin     verdicts.Window[uint64] // the count of rights the verdicts answer for, and when they began
	vEpoch   uint64                  // bumped at every reset of the verdicts
	verdicts map[place]map[principalKey]bool
	flights  map[place]*flight

	// smu guards the reads every listener of an event shares
	// (Delivery.Shared), by key, kept while nothing touched them.
	smu    sync.Mutex
	sWin   verdicts.Window[uint64] // the count of touches the shared reads answer for
	shared map[string]*sharedRead
	// rendered are the events as a document renders them for a principal
	// (Delivery.Rendered), kept and dropped with the shared reads, and
	// renderedBytes their size, at most RenderedBytes.
	rendered      map[renderKey]*rendering
	renderedBytes int
	// kept and reused count the renderings kept for sharing and the
	// deliveries that reused one (Renderings).
	kept, reused atomic.Uint64
	// renderWait, when set (by a test), is called when a listener starts
	// waiting for another's rendering.
	renderWait func()
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
	// The window is in commit order: the events after the cursor are its
	// tail, found by halving, not by reading every event of the window
	// (thousands of listeners read it at every commit).
	i := sort.Search(len(f.window), func(i int) bool { return f.window[i].Seq > cursor })
	pending := slices.Clone(f.window[i:])
	// The count of rights read with the events: every change of rights
	// committed before them is in it.
	rights := f.rights
	f.mu.Unlock()
	if len(pending) == 0 {
		return nil, after, false, true, nil
	}
	verdicts, err := f.decide(ctx, gen, rights, l, pending)
	if err != nil {
		return nil, "", false, false, err
	}
	next = after
	for i, e := range pending {
		if len(evs) == max {
			return evs, next, i < len(pending), true, nil
		}
		if verdicts[i] {
			evs = append(evs, e)
		}
		next = strconv.FormatInt(e.Seq, 10)
	}
	return evs, next, false, true, nil
}

// Visible says whether the listener may see e now, from the verdict on
// e's place that every listener of the same principal shares. ok is false
// when commits do not reach this replica: the caller decides alone
// (Service.Visible).
//
// Errors: a database error.
func (l *Listener) Visible(ctx context.Context, e events.Event) (visible, ok bool, err error) {
	if !l.f.hub.Connected() {
		return false, false, nil
	}
	f, gen := l.f, l.f.hub.Changed()
	// The window of this generation holds the changes of rights committed
	// before it: read them before deciding.
	if err := f.refresh(ctx, gen); err != nil {
		return false, false, err
	}
	f.mu.Lock()
	rights := f.rights
	f.mu.Unlock()
	verdicts, err := f.decide(ctx, gen, rights, l, []events.Event{e})
	if err != nil {
		return false, false, err
	}
	return verdicts[0], true, nil
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
			return problem.Internal("feed.fanout: read log end", err)
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
			return problem.Internal("feed.fanout: read events after tail", err)
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
				return problem.Internal("feed.fanout: read log end after burst", err)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			// The burst is not looked at: it may change rights and
			// shared reads.
			f.rights++
			f.touched++
			f.window, f.bytes, f.base, f.tail, f.read = nil, 0, end, end, gen
			return nil
		}
		if len(evs) < f.svc.limitMax {
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count(fresh)
	f.keep(fresh, size)
	f.tail, f.read = tail, gen
	return nil
}

// keep appends fresh (size bytes) to the window and drops its oldest
// events until it holds at most FanoutWindow events and FanoutWindowBytes.
// The caller holds mu.
func (f *Fanout) keep(fresh []events.Event, size int) {
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
}

// count counts the changes of rights and of shared reads among fresh, in
// the same hold of mu that puts them in the window: a listener that sees
// an event sees every change committed before it (the ordering rule).
func (f *Fanout) count(fresh []events.Event) {
	for _, e := range fresh {
		if rightsEvent(e.Type) {
			f.rights++
		}
		if touchesReads(e.Type) {
			f.touched++
		}
	}
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
		return nil, problem.Internal("feed.decideMany: filter message reads", err)
	}
	keepSpace := make([][]bool, len(actors))
	if len(t.space) > 0 {
		if keepSpace, err = s.authz.FilterMany(ctx, actors, authz.SpaceRead, t.space); err != nil {
			return nil, problem.Internal("feed.decideMany: filter space reads", err)
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
