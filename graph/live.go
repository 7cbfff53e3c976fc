package graph

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// Live are the settings of subscriptions.
type Live struct {
	// SendQueue is websocket.send_queue: the events one subscription may
	// have waiting for a slow consumer before its connection is closed.
	SendQueue int
	// Log receives internal errors of subscriptions.
	Log *slog.Logger
	// Verdicts shares the decisions on live boxes among the subscriptions
	// of the replica; nil gives each subscription a cache of its own.
	Verdicts *LiveVerdicts
}

// SubscriptionConn is the connection a subscription runs on, as the
// WebSocket transport of the server puts it in the context.
type SubscriptionConn interface {
	// QueueFull closes the connection because a subscription's consumer
	// fell behind by more than its queue: the client resumes from the
	// cursor of the last event it received.
	QueueFull()
	// Restarting closes the connection because the server drains: the
	// client reconnects (to another replica) and resumes from its cursor.
	Restarting()
	// TryAgainLater closes the connection because a subscription met a
	// database error: the client reconnects after a pause and resumes
	// from its cursor.
	TryAgainLater()
}

type connKey struct{}

// WithSubscriptionConn returns ctx carrying the connection c.
func WithSubscriptionConn(ctx context.Context, c SubscriptionConn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// livePrincipal returns how a subscription of the caller start learns who
// its caller is now: it authenticates the connection's token again
// (identity.WithToken, as the WebSocket transport's connection_init put
// it), so that every page and every event is decided with the principal's
// current status and owner flag, and nothing is handed out once the token
// is revoked or expired or the principal disabled (ok false; the
// connection's watcher closes it with 4403). With Resolver.Tokens the
// tokens of all connections are checked together once per commit;
// without, it costs one token statement per call. Without a token in the
// context it answers start.
func (r *Resolver) livePrincipal(start identity.Principal) func(context.Context) (p identity.Principal, ok bool, err error) {
	return func(ctx context.Context) (identity.Principal, bool, error) {
		tok, has := identity.TokenFromContext(ctx)
		if !has {
			return start, true, nil
		}
		// A batch stands for a generation only while commits reach this
		// replica (docs/design/rights.md#live-rights).
		if hub := r.Runs.Hub(); r.Tokens != nil && hub.Connected() {
			p, ok, err := r.Tokens.Check(ctx, hub.Changed(), tok)
			if err != nil || !ok {
				return identity.Principal{}, false, err
			}
			return p, p.ID == start.ID, nil
		}
		p, err := r.Identity.Authenticate(ctx, tok)
		if err != nil {
			if problem.CodeOf(err) == problem.Unauthorized {
				return identity.Principal{}, false, nil
			}
			return identity.Principal{}, false, err
		}
		return p, p.ID == start.ID, nil
	}
}

// clientEvents is the source of one Subscription.events (Events says how
// it decides with the caller as it is now).
type clientEvents struct {
	r *Resolver
	// now is the caller as it is now (livePrincipal).
	now func(context.Context) (identity.Principal, bool, error)
	// l is the subscription's listener on the fan-out; nil without one.
	l *feed.Listener
	// cursor is the position in the log after the events read so far.
	cursor string
}

// listen makes the subscription a listener of the replica's fan-out, until
// ctx ends.
func (c *clientEvents) listen(ctx context.Context, p identity.Principal) {
	tok, _ := identity.TokenFromContext(ctx)
	l := c.r.Fanout.Listen(p, tok)
	c.l = l
	go func() {
		<-ctx.Done()
		l.Close()
	}()
}

// fetch reads the next page after the cursor (stream.fetch): from the
// fan-out when it can answer, from the feed with the caller as it is now
// otherwise.
func (c *clientEvents) fetch(ctx context.Context, max int) ([]events.Event, bool, error) {
	max = min(max, c.r.Feed.LimitMax())
	if c.l != nil {
		evs, next, more, ok, err := c.l.Next(ctx, c.cursor, max)
		if err != nil {
			return nil, false, err
		}
		if ok {
			c.cursor = next
			return evs, more, nil
		}
	}
	p, ok, err := c.now(ctx)
	if err != nil || !ok {
		return nil, false, err
	}
	page, err := c.r.Feed.Next(ctx, p, c.cursor, max)
	if err != nil {
		return nil, false, err
	}
	// A page whose cursor moved may have been cut by the limit (filter
	// mode can leave it with fewer items): read again until one comes back
	// without moving.
	more := page.NextAfter != c.cursor
	c.cursor = page.NextAfter
	return page.Events, more, nil
}

// visible checks e again right before it is handed out (stream.visible):
// by the fan-out's verdict when it has one, with the caller as it is now
// otherwise.
func (c *clientEvents) visible(ctx context.Context, e events.Event) (bool, error) {
	if c.l != nil {
		visible, ok, err := c.l.Visible(ctx, e)
		if err != nil || ok {
			return visible, err
		}
	}
	p, ok, err := c.now(ctx)
	if err != nil || !ok {
		return false, err
	}
	return c.r.Feed.Visible(ctx, p, e)
}

// model turns e into its GraphQL object (stream.model). With a fan-out, a
// message event carries its Delivery, so that its fields read what every
// listener reads once.
func (c *clientEvents) model(e events.Event) (model.Event, error) {
	m := eventModel(e)
	if me, ok := m.(*model.MessageEvent); ok && c.l != nil {
		me.Delivery = c.l.Deliver(e)
	}
	return m, nil
}

// stream are the parts of one subscription.
type stream[T any] struct {
	// fetch reads up to max events after the subscription's cursor (and
	// moves it); more says the page may have been cut, so there may be more.
	fetch func(ctx context.Context, max int) (evs []events.Event, more bool, err error)
	// visible, when set, checks an event again right before it is handed
	// to the transport, which writes it at once.
	visible func(context.Context, events.Event) (bool, error)
	// model turns an event into its GraphQL object.
	model func(events.Event) (T, error)
	// start is the cursor the subscription started from.
	start string
	// side, when set, delivers objects that are not rows of the log (the
	// changes of live boxes) between the log's events: each is built with
	// the seq of the last log event delivered, or skipped (ok false).
	side <-chan func(lastSeq string) (T, bool)
	// sideFull is closed when the side source dropped objects because the
	// consumer fell behind: the connection closes (4413) and the client
	// reads again.
	sideFull <-chan struct{}
}

// pump runs a subscription. Events wait in a queue of at most
// Live.SendQueue and are handed one by one, in commit order, to the
// transport through an unbuffered channel, so that an event handed over is
// written at once, after its last visibility check. A backlog (the events
// after the cursor the subscription started from) is read from the
// database at the consumer's pace. Once caught up, every commit on any
// replica (the hub) wakes it to read what is new; new events that do not
// fit the queue mean the consumer fell behind the live stream: its
// connection is closed (4413) and it resumes from its cursor, and the
// server never buffers without bound. An error ends the subscription with
// an error message.
func pump[T any](ctx context.Context, r *Resolver, s stream[T]) <-chan T {
	limit := r.Live.SendQueue
	if limit < 1 {
		limit = 1
	}
	conn, _ := ctx.Value(connKey{}).(SubscriptionConn)
	p := &pumping[T]{ctx: ctx, r: r, s: s, out: make(chan T), hub: r.Runs.Hub(), conn: conn,
		limit: limit, last: s.start, backlog: true}
	go p.run()
	return p.out
}

// pumping is the state of one running subscription (pump).
type pumping[T any] struct {
	ctx   context.Context
	r     *Resolver
	s     stream[T]
	out   chan T
	hub   *runs.Hub
	conn  SubscriptionConn // nil outside a WebSocket connection
	limit int
	// queue are the events read and not yet delivered, in commit order;
	// head is the checked model of queue[0] when ready.
	queue []events.Event
	head  T
	ready bool
	// last is the cursor of the last log event delivered.
	last string
	// backlog: not yet caught up with the end of the stream.
	backlog bool
	// tick re-reads periodically: it covers a notification lost with a
	// listener connection between its loss and the hub's wake-up.
	tick *time.Ticker
}

// run alternates fill and deliver until the subscription ends.
func (p *pumping[T]) run() {
	defer close(p.out)
	p.tick = time.NewTicker(time.Minute)
	defer p.tick.Stop()
	for {
		changed := p.hub.Changed()
		if !p.fill() || !p.deliver(changed) {
			return
		}
	}
}

// fill reads events into the queue: the backlog while the queue has
// room, and, once caught up, everything new, one event more than fits
// telling that the consumer fell behind (its connection closes with
// 4413). It answers false when the subscription ends.
func (p *pumping[T]) fill() bool {
	for more := true; more; {
		free := p.limit - len(p.queue)
		if p.backlog && free == 0 {
			return true // read on when the consumer took some
		}
		max := free
		if !p.backlog {
			max = free + 1
		}
		evs, m, err := p.s.fetch(p.ctx, max)
		if err != nil {
			p.fail(err)
			return false
		}
		if len(evs) > free {
			p.queueFull()
			return false
		}
		p.queue = append(p.queue, evs...)
		if more = m; !more {
			p.backlog = false
		}
	}
	return true
}

// deliver hands the queue's events to the transport one by one, each
// checked right before, and the side source's objects between them,
// until the backlog needs its next part or a commit (changed), the
// periodic tick or the end of the queue's room asks fill to read on. It
// answers false when the subscription ends.
func (p *pumping[T]) deliver(changed <-chan struct{}) bool {
	for {
		if !p.prepareHead() {
			return false
		}
		var send chan<- T
		if p.ready {
			send = p.out
		}
		if p.backlog && len(p.queue) == 0 {
			return true // read the next part of the backlog
		}
		if p.handOverNow() {
			continue
		}
		select {
		case send <- p.head:
			p.handedOver()
		case build := <-p.s.side:
			if !p.sendSide(build) {
				return false
			}
		case <-p.s.sideFull:
			p.queueFull()
			return false
		case <-changed:
			// Something committed: read on, and check the head again
			// (a revoked grant commits an event too).
			p.ready = false
			return true
		case <-p.tick.C:
			p.ready = false
			return true
		case <-p.hub.Stopping():
			p.restarting()
			return false
		case <-p.ctx.Done():
			return false
		}
	}
}

// handOverNow hands the ready head to a transport that waits for it
// already, which it mostly does, without deliver's full select: that
// select locks every channel it names (at a thousand listeners, a few
// microseconds per event and listener). It answers whether it did.
func (p *pumping[T]) handOverNow() bool {
	if !p.ready {
		return false
	}
	select {
	case p.out <- p.head:
		p.handedOver()
		return true
	default:
		return false
	}
}

// handedOver notes that the queue's head went to the transport.
func (p *pumping[T]) handedOver() {
	p.last = strconv.FormatInt(p.queue[0].Seq, 10)
	p.queue, p.ready = p.queue[1:], false
}

// prepareHead makes head the model of the first queued event the caller
// may still see, dropping those it may no longer see. It answers false
// when the subscription ends.
func (p *pumping[T]) prepareHead() bool {
	for !p.ready && len(p.queue) > 0 {
		if p.s.visible != nil {
			ok, err := p.s.visible(p.ctx, p.queue[0])
			if err != nil {
				p.fail(err)
				return false
			}
			if !ok {
				p.queue = p.queue[1:]
				continue
			}
		}
		m, err := p.s.model(p.queue[0])
		if err != nil {
			p.fail(err)
			return false
		}
		p.head, p.ready = m, true
	}
	return true
}

// sendSide builds a side object after the last log event delivered and
// hands it over; it answers false when the subscription ends meanwhile.
func (p *pumping[T]) sendSide(build func(lastSeq string) (T, bool)) bool {
	m, ok := build(p.last)
	if !ok {
		return true
	}
	select {
	case p.out <- m:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// restarting closes the connection of a subscription whose server
// drains: with 1012, never a complete, so the client resumes elsewhere.
func (p *pumping[T]) restarting() {
	if p.conn != nil {
		p.conn.Restarting()
	}
}

// queueFull closes the connection of a consumer that fell behind.
func (p *pumping[T]) queueFull() {
	if p.conn != nil {
		p.conn.QueueFull()
	}
}

// fail ends the subscription on err. A database error is temporary: no
// error message and complete (which would end the client's subscription
// for good), but a close that asks it to come back and resume from its
// cursor, losing and repeating nothing. Any other error ends it with an
// error message.
func (p *pumping[T]) fail(err error) {
	ctx, log := p.ctx, p.r.Live.Log
	if ctx.Err() != nil {
		return
	}
	e := problem.From("graph.fail", err)
	if (e.Code == problem.InternalError || e.Code == problem.Unavailable) && p.conn != nil {
		if e.Cause() != nil && log != nil {
			log.WarnContext(ctx, "subscription stopped: try again later", "error", e.Cause().Error())
		}
		p.conn.TryAgainLater()
		return
	}
	if e.Code == problem.InternalError && e.Cause() != nil && log != nil {
		log.ErrorContext(ctx, "subscription failed", "error", e.Cause().Error())
	}
	transport.AddSubscriptionError(ctx, &gqlerror.Error{Message: e.Code.Title(),
		Extensions: map[string]any{"code": string(e.Code), "status": e.Code.Status()}})
}
