// Package feed owns listEvents: the client events after a cursor that the
// reader may see, selected with a visibility predicate and then checked item
// by item in filter mode.
package feed

import (
	"context"
	"strconv"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// Service lists events.
type Service struct {
	authz                  *authz.Service
	chat                   *chat.Service
	log                    *events.Log
	limitDefault, limitMax int
	hook                   Hook // nil in production
}

// Hook is a test instrument: it sees the events the query returned before
// filter mode checks them, so that a test can prove that filter mode drops
// an event a faulty query would leak. Production passes none.
type Hook interface {
	Events(evs []events.Event) []events.Event
}

// Option adjusts a Service at construction.
type Option func(*Service)

// WithHook installs h (tests only; see Hook).
func WithHook(h Hook) Option { return func(s *Service) { s.hook = h } }

// NewService returns the feed. limitDefault and limitMax are
// events.list_limit_default and events.list_limit_max.
func NewService(az *authz.Service, c *chat.Service, log *events.Log, limitDefault, limitMax int, opts ...Option) *Service {
	s := &Service{authz: az, chat: c, log: log, limitDefault: limitDefault, limitMax: limitMax}
	for _, o := range opts {
		o(s)
	}
	return s
}

// LimitMax is events.list_limit_max: the largest page Next reads.
func (s *Service) LimitMax() int { return s.limitMax }

// Page is a page of events with the cursor for the next call.
type Page struct {
	Events    []events.Event
	NextAfter string
	// More says whether events of the log followed this page when it was
	// read (visible to the caller or not).
	More bool
}

// List returns up to limit events after the cursor after that actor may
// see. NextAfter is the last seq handed out, or after when nothing came.
func (s *Service) List(ctx context.Context, actor identity.Principal, after string, limit int) (Page, error) {
	d, _, err := s.authz.Authorize(ctx, actor, authz.EventsList, authz.Instance())
	if err != nil {
		return Page{}, err
	}
	return s.page(ctx, actor, *d.Scope, after, limit)
}

// Start checks a subscription's cursor and returns where it starts: after
// the named seq, or at the current end of the log for "" and "now". It
// decides events.list, which spends the rate token once for the whole
// subscription.
func (s *Service) Start(ctx context.Context, actor identity.Principal, after string) (string, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.EventsList, authz.Instance()); err != nil {
		return "", err
	}
	if after != "" && after != "now" {
		if _, ok := events.ParseCursor(after); !ok {
			return "", problem.Invalid(problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
		}
		return after, nil
	}
	end, err := s.log.End(ctx)
	if err != nil {
		return "", problem.Internal("feed.start", err)
	}
	return strconv.FormatInt(end, 10), nil
}

// Next is List without the rate token (Start took it): the page a
// subscription delivers after each wake-up, with events.list decided again
// and the same visibility predicate and filter mode, evaluated now (so a
// grant revoked since the last page hides its events).
func (s *Service) Next(ctx context.Context, actor identity.Principal, after string, limit int) (Page, error) {
	d, _, err := s.authz.Authorize(authz.Prepaid(ctx), actor, authz.EventsList, authz.Instance())
	if err != nil {
		return Page{}, err
	}
	return s.page(ctx, actor, *d.Scope, after, limit)
}

// page reads the events after the cursor after that lie in scope and
// passes them through filter mode.
func (s *Service) page(ctx context.Context, actor identity.Principal, scope authz.Scope, after string, limit int) (Page, error) {
	cursor, err := s.cursor(ctx, after)
	if err != nil {
		return Page{}, err
	}
	if limit == 0 {
		limit = s.limitDefault
	}
	if limit < 1 || limit > s.limitMax {
		return Page{}, problem.Invalid(problem.FieldError{Pointer: "limit", Code: "out_of_range", Detail: "must lie between 1 and events.list_limit_max"})
	}
	var chans, threads []string
	if !scope.All {
		if chans, threads, err = s.chat.VisibleIn(ctx, scope); err != nil {
			return Page{}, problem.Internal("feed.page: read visible threads", err)
		}
	}
	// One event more than the page tells whether more follow.
	evs, err := s.log.AfterIn(ctx, cursor, limit+1, scope.All, chans, threads, scope.Spaces)
	if err != nil {
		return Page{}, problem.Internal("feed.page: read events", err)
	}
	more := len(evs) > limit
	if more {
		evs = evs[:limit]
	}
	next := after
	if next == "" {
		next = "0"
	}
	if len(evs) > 0 {
		next = strconv.FormatInt(evs[len(evs)-1].Seq, 10)
	}
	if s.hook != nil {
		evs = s.hook.Events(evs)
	}
	out, err := s.filter(ctx, actor, evs)
	if err != nil {
		return Page{}, err
	}
	return Page{Events: out, NextAfter: next, More: more}, nil
}

// cursor parses the cursor after and checks that retention has not removed
// events after it: a cursor below the horizon would silently skip them.
func (s *Service) cursor(ctx context.Context, after string) (int64, error) {
	cursor, ok := events.ParseCursor(after)
	if !ok {
		return 0, problem.Invalid(problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
	}
	if cursor > 0 {
		// Cursor 0 means "from the oldest kept event"; any other cursor
		// below what retention removed would silently skip events.
		horizon, err := s.log.Horizon(ctx, events.StreamClient)
		if err != nil {
			return 0, problem.Internal("feed.page", err)
		}
		if cursor < horizon {
			return 0, problem.Expired(horizon)
		}
	}
	return cursor, nil
}

// Visible says whether actor may see e now, in filter mode as listEvents
// checks it: subscriptions ask it again right before they deliver e.
func (s *Service) Visible(ctx context.Context, actor identity.Principal, e events.Event) (bool, error) {
	out, err := s.filter(ctx, actor, []events.Event{e})
	return len(out) == 1, err
}

// filter keeps the events of evs that actor may read now.
func (s *Service) filter(ctx context.Context, actor identity.Principal, evs []events.Event) ([]events.Event, error) {
	t, err := s.targetsOf(ctx, evs)
	if err != nil {
		return nil, err
	}
	keepChan, err := s.authz.Filter(ctx, actor, authz.MessageRead, t.channel)
	if err != nil {
		return nil, problem.Internal("feed.filter: filter message reads", err)
	}
	var keepSpace []bool
	if len(t.space) > 0 {
		if keepSpace, err = s.authz.Filter(ctx, actor, authz.SpaceRead, t.space); err != nil {
			return nil, problem.Internal("feed.filter: filter space reads", err)
		}
	}
	keep := make([]bool, len(evs))
	for j, i := range t.inChannel {
		keep[i] = keepChan[j]
	}
	for j, i := range t.ofSpace {
		keep[i] = keepSpace[j]
	}
	out := make([]events.Event, 0, len(evs))
	for i, e := range evs {
		if keep[i] {
			out = append(out, e)
		}
	}
	return out, nil
}

// targets are the questions filter mode asks about a list of events:
// channel events are checked as message reads on their channel or thread
// (channel, the events at inChannel), space events as space reads (space,
// the events at ofSpace).
type targets struct {
	channel, space     []authz.Facts
	inChannel, ofSpace []int
}

// targetsOf reads the paths of evs: one statement for the channel events,
// one per space event.
func (s *Service) targetsOf(ctx context.Context, evs []events.Event) (targets, error) {
	var t targets
	var pairs [][2]string
	var spacePaths []authz.Path
	for i, e := range evs {
		if e.ChannelID == "" {
			t.ofSpace = append(t.ofSpace, i)
			continue
		}
		t.inChannel = append(t.inChannel, i)
		pairs = append(pairs, [2]string{e.ChannelID, e.ThreadID})
	}
	paths, err := s.chat.PathsOf(ctx, authz.KindMessage, pairs)
	if err != nil {
		return targets{}, problem.Internal("feed.filter: read message paths", err)
	}
	for _, i := range t.ofSpace {
		p, err := s.authz.PathOf(ctx, authz.Resource{Kind: authz.KindSpace, ID: evs[i].SpaceID})
		if err != nil {
			return targets{}, problem.Internal("feed.filter: read space path", err)
		}
		spacePaths = append(spacePaths, p)
	}
	t.channel, t.space = facts(paths), facts(spacePaths)
	return t, nil
}

// facts returns paths as targets of filter mode whose grants authz reads.
func facts(paths []authz.Path) []authz.Facts {
	out := make([]authz.Facts, len(paths))
	for i, p := range paths {
		out[i] = authz.Facts{Path: p}
	}
	return out
}
