package graph

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
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
			if problem.From(err).Code == problem.Unauthorized {
				return identity.Principal{}, false, nil
			}
			return identity.Principal{}, false, err
		}
		return p, p.ID == start.ID, nil
	}
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
	out := make(chan T)
	hub := r.Runs.Hub()
	go func() {
		defer close(out)
		conn, _ := ctx.Value(connKey{}).(SubscriptionConn)
		fail := func(err error) {
			if ctx.Err() != nil {
				return
			}
			p := problem.From(err)
			if (p.Code == problem.InternalError || p.Code == problem.Unavailable) && conn != nil {
				// A database error is temporary: no error message and
				// complete (which would end the client's subscription for
				// good), but a close that asks it to come back and resume
				// from its cursor, losing and repeating nothing.
				if p.Cause() != nil && r.Live.Log != nil {
					r.Live.Log.WarnContext(ctx, "subscription stopped: try again later", "error", p.Cause().Error())
				}
				conn.TryAgainLater()
				return
			}
			if p.Code == problem.InternalError && p.Cause() != nil && r.Live.Log != nil {
				r.Live.Log.ErrorContext(ctx, "subscription failed", "error", p.Cause().Error())
			}
			transport.AddSubscriptionError(ctx, &gqlerror.Error{Message: p.Code.Title(),
				Extensions: map[string]any{"code": string(p.Code), "status": p.Code.Status()}})
		}
		// A periodic re-read covers a notification lost with a listener
		// connection between its loss and the hub's wake-up.
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		var queue []events.Event
		last := s.start
		var head T
		ready := false  // head is the checked model of queue[0]
		backlog := true // not yet caught up with the end of the stream
		for {
			changed := hub.Changed()
			for more := true; more; {
				free := limit - len(queue)
				if backlog && free == 0 {
					break // read on when the consumer took some
				}
				// Caught up, one event more than fits tells that the
				// consumer fell behind.
				max := free
				if !backlog {
					max = free + 1
				}
				evs, m, err := s.fetch(ctx, max)
				if err != nil {
					fail(err)
					return
				}
				if len(evs) > free {
					if conn != nil {
						conn.QueueFull()
					}
					return
				}
				queue = append(queue, evs...)
				if more = m; !more {
					backlog = false
				}
			}
			for {
				var send chan<- T
				if !ready && len(queue) > 0 {
					if s.visible != nil {
						ok, err := s.visible(ctx, queue[0])
						if err != nil {
							fail(err)
							return
						}
						if !ok {
							queue = queue[1:]
							continue
						}
					}
					m, err := s.model(queue[0])
					if err != nil {
						fail(err)
						return
					}
					head, ready = m, true
				}
				if ready {
					send = out
				}
				if backlog && len(queue) == 0 {
					break // read the next part of the backlog
				}
				select {
				case send <- head:
					last = strconv.FormatInt(queue[0].Seq, 10)
					queue, ready = queue[1:], false
					continue
				case build := <-s.side:
					if m, ok := build(last); ok {
						select {
						case out <- m:
						case <-ctx.Done():
							return
						}
					}
					continue
				case <-s.sideFull:
					if conn != nil {
						conn.QueueFull()
					}
					return
				case <-changed:
					// Something committed: read on, and check the head again
					// (a revoked grant commits an event too).
					ready = false
				case <-tick.C:
					ready = false
				case <-hub.Stopping():
					// Draining: the connection closes with 1012, never a
					// complete, so the client resumes elsewhere.
					if conn != nil {
						conn.Restarting()
					}
					return
				case <-ctx.Done():
					return
				}
				break
			}
		}
	}()
	return out
}
