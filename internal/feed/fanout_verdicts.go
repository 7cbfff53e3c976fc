package feed

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/tracing"
)

// The fan-out's verdicts (docs/performance.md "Fan-out"): whether an event
// may be seen depends only on its place (its channel and thread, or its
// space) and on who reads it, so a verdict is kept per (principal, place)
// and shared by every connection of that principal. Verdicts live until
// the window reads a change of rights (rightsEvent), and at most
// verdicts.TTL of the clock (a verdicts.Window), because an expiry passes without a
// commit: not until the next commit, which, once delivery is slower than
// the gap between commits, made every commit decide everything again.
// Changes of rights that commit no event (a token revoked, a principal
// disabled or demoted) come through the tokens, re-checked in one batch
// per commit (Tokens): they change the principal, which is part of the key.

// place is what an event's verdict depends on besides its reader.
type place struct{ channel, thread, space string }

func placeOf(e events.Event) place {
	if e.ChannelID == "" {
		return place{space: e.SpaceID}
	}
	return place{channel: e.ChannelID, thread: e.ThreadID}
}

// principalKey is what a verdict depends on of its reader: the parts of
// identity.Principal the rules read.
type principalKey struct {
	id, kind, status              string
	owner                         bool
	runID, runThreadID, runHolder string
}

func keyOf(p identity.Principal) principalKey {
	return principalKey{id: p.ID, kind: string(p.Kind), status: string(p.Status), owner: p.IsOwner,
		runID: p.RunID, runThreadID: p.RunThreadID, runHolder: p.RunHolder}
}

// rightsEvent says whether an event of type t may change who reads which
// place: every type but those known not to (a new message or thread
// adds to a place, a run's progress changes no right). Unknown types count
// as changes, so a new kind of rights event is safe before it is listed.
func rightsEvent(t events.Type) bool {
	switch t {
	case events.MessageCreated, events.ThreadCreated, events.RunStateChanged, events.RunLiveUpdated:
		return false
	default:
		// Everything else may change a right (see above).
	}
	return true
}

// touchesReads says whether an event of type t may change what a shared
// read holds (a message deleted, a thread moved, a run changing its
// message's trigger state): every type but a new message or thread.
func touchesReads(t events.Type) bool {
	return t != events.MessageCreated && t != events.ThreadCreated
}

// flight is one decision of some places for every listener, under way;
// the listeners that need it meanwhile wait for it instead of deciding
// again. It is registered for its places in the same hold of vmu in which
// its listener found no verdict and no flight for them, so two listeners
// never decide one place at once (the statements per message would then
// depend on how the listeners' reads interleave).
type flight struct {
	done   chan struct{}
	epoch  uint64                // the verdicts' epoch it was registered in
	covers map[principalKey]bool // the principals it decides (set before done)
	out    map[place]map[principalKey]bool
	err    error
}

// decide returns, for each event of evs, whether l may see it in
// generation gen, with the changes of rights counted up to rights applied.
// A place some listener has no verdict on yet is decided for every
// listener's principal at once. A flight that did not cover l's principal
// (it joined after the flight took the principals) is followed by a
// decision of its own.
func (f *Fanout) decide(ctx context.Context, gen <-chan struct{}, rights uint64, l *Listener, evs []events.Event) ([]bool, error) {
	out := make([]bool, len(evs))
	p, ok, err := f.principalOf(ctx, gen, l)
	if err != nil || !ok {
		return out, err
	}
	key := keyOf(p)
	for {
		wait, todo, mine := f.lookup(rights, key, evs, out)
		if mine != nil {
			var reps []events.Event
			seen := map[place]bool{}
			for _, i := range todo {
				if pl := placeOf(evs[i]); !seen[pl] {
					seen[pl] = true
					reps = append(reps, evs[i])
				}
				wait[i] = mine
			}
			f.fly(ctx, gen, key, p, mine, reps)
		}
		again := false
		for i, fl := range wait {
			select {
			case <-fl.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if fl.err != nil {
				return nil, fl.err
			}
			if !fl.covers[key] {
				again = true
				continue
			}
			out[i] = fl.out[placeOf(evs[i])][key]
		}
		if !again {
			return out, nil
		}
	}
}

// lookup fills out with the kept verdicts of key, and answers the flights
// to wait for, the events no flight decides and mine, the flight it
// registered for their places (nil when there are none), which the caller
// must fly.
func (f *Fanout) lookup(rights uint64, key principalKey, evs []events.Event, out []bool) (wait map[int]*flight, todo []int, mine *flight) {
	wait = map[int]*flight{}
	f.vmu.Lock()
	defer f.vmu.Unlock()
	// A newer count of rights, or the clock past the verdicts' bound,
	// starts afresh; an older count (a listener that read the window
	// before the change) uses the newer verdicts, which applied more.
	if !f.vWin.Hold(max(rights, f.vWin.Gen()), f.clock) {
		f.vEpoch++
		f.verdicts, f.flights = map[place]map[principalKey]bool{}, map[place]*flight{}
	}
	for i, e := range evs {
		pl := placeOf(e)
		if v, ok := f.verdicts[pl][key]; ok {
			out[i] = v
			continue
		}
		// A flight under way may not cover key; decide tells after it.
		if fl := f.flights[pl]; fl != nil && fl != mine {
			wait[i] = fl
			continue
		}
		if mine == nil {
			mine = &flight{done: make(chan struct{}), epoch: f.vEpoch}
		}
		f.flights[pl] = mine
		todo = append(todo, i)
	}
	return wait, todo, mine
}

// fly decides the places of reps (one event of each) for every listener's
// principal and the caller's (p, of key) as flight fl, keeps the verdicts
// unless they were reset meanwhile, and closes fl. It runs without the
// caller's cancellation: other listeners wait for it.
func (f *Fanout) fly(ctx context.Context, gen <-chan struct{}, key principalKey, p identity.Principal, fl *flight, reps []events.Event) {
	ctx = context.WithoutCancel(ctx)
	actors, err := f.principals(ctx, gen)
	if err == nil {
		if _, ok := actors[key]; !ok {
			actors[key] = p
		}
		covers := map[principalKey]bool{}
		keys := make([]principalKey, 0, len(actors))
		list := make([]identity.Principal, 0, len(actors))
		for k, a := range actors {
			covers[k] = true
			keys, list = append(keys, k), append(list, a)
		}
		fl.covers = covers
		fl.out, err = f.decidePlaces(ctx, keys, list, reps)
	}
	fl.err = err
	f.vmu.Lock()
	if f.vEpoch == fl.epoch {
		for _, e := range reps {
			pl := placeOf(e)
			if fl.err == nil {
				f.verdicts[pl] = fl.out[pl]
			}
			if f.flights[pl] == fl {
				delete(f.flights, pl)
			}
		}
	}
	f.vmu.Unlock()
	close(fl.done)
}

// principalOf is l's principal in generation gen: the one its token
// authenticates now (ok false when it no longer authenticates the
// principal the listener started with: it sees nothing), or the one it
// started with when it has no token.
func (f *Fanout) principalOf(ctx context.Context, gen <-chan struct{}, l *Listener) (identity.Principal, bool, error) {
	if l.token == "" {
		return l.start, true, nil
	}
	held, ok, err := f.tokens.Check(ctx, gen, l.token)
	if err != nil || !ok || held.ID != l.start.ID {
		return identity.Principal{}, false, err
	}
	return held, true, nil
}

// principals are the distinct principals of the listeners in generation
// gen, by key: the tokens of all connections are checked in one batch for
// the generation (Tokens).
func (f *Fanout) principals(ctx context.Context, gen <-chan struct{}) (map[principalKey]identity.Principal, error) {
	f.mu.Lock()
	listeners := make([]*Listener, 0, len(f.listeners))
	for l := range f.listeners {
		listeners = append(listeners, l)
	}
	f.mu.Unlock()
	out := map[principalKey]identity.Principal{}
	for _, l := range listeners {
		p, ok, err := f.principalOf(ctx, gen, l)
		if err != nil {
			return nil, err
		}
		if ok {
			out[keyOf(p)] = p
		}
	}
	return out, nil
}

// decidePlaces decides the places of reps for each principal of list (of
// keys): in the statements of decideMany, whatever the number of
// principals.
func (f *Fanout) decidePlaces(ctx context.Context, keys []principalKey, list []identity.Principal, reps []events.Event) (map[place]map[principalKey]bool, error) {
	// One span for the decision every listener shares: it runs in the
	// request of whichever connection asked first, and its statements are
	// below it.
	ctx, span := tracing.Start(ctx, "feed.fanout", trace.SpanKindInternal)
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(fanoutEventsKey.Int(len(reps)), fanoutListenersKey.Int(len(list)))
	}
	keep, err := f.svc.decideMany(ctx, list, reps)
	if err != nil {
		return nil, err
	}
	out := make(map[place]map[principalKey]bool, len(reps))
	for j, e := range reps {
		v := make(map[principalKey]bool, len(keys))
		for i, k := range keys {
			v[k] = keep[i][j]
		}
		out[placeOf(e)] = v
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

// sharedRead is one read that the listeners of an event share.
type sharedRead struct {
	done chan struct{}
	v    any
	err  error
}

// Shared returns the value of key for the listener, read once by load for
// every listener of the event, when the listener may see the event now
// (the fan-out's verdict is the decision of the read); nil when it may
// not. A read is kept until the window reads an event that may change it
// (touchesReads), and at most verdicts.TTL, not only for one
// commit: a delivery slower than the gap between commits would read it
// again at every commit. handled is false when the fan-out cannot answer
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
	r, first := f.sharedRead(key)
	if first {
		r.v, r.err = load(context.WithoutCancel(ctx))
		if r.err != nil {
			f.smu.Lock()
			if f.shared[key] == r {
				delete(f.shared, key)
			}
			f.smu.Unlock()
		}
		close(r.done)
	} else {
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, true, ctx.Err()
		}
	}
	return r.v, true, r.err
}

// sharedRead answers the kept read of key, or a new one to load (first).
func (f *Fanout) sharedRead(key string) (r *sharedRead, first bool) {
	f.lockShared()
	defer f.smu.Unlock()
	if r = f.shared[key]; r != nil {
		return r, false
	}
	r = &sharedRead{done: make(chan struct{})}
	f.shared[key] = r
	return r, true
}

// lockShared locks smu for a look at the shared reads and the renderings,
// dropping them first when something touched them (holdShared).
func (f *Fanout) lockShared() {
	f.mu.Lock()
	touched := f.touched
	f.mu.Unlock()
	f.smu.Lock()
	f.holdShared(touched)
}

// holdShared drops the shared reads and the renderings when the window
// read an event that touched them since they were kept (touched is
// f.touched), or when they are older than verdicts.TTL. Callers hold smu.
func (f *Fanout) holdShared(touched uint64) {
	if !f.sWin.Hold(max(touched, f.sWin.Gen()), f.clock) {
		f.shared = map[string]*sharedRead{}
		f.rendered, f.renderedBytes = map[renderKey]*rendering{}, 0
	}
}
