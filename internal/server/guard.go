package server

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/mcpface"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
)

// writeDeadlines lets long polls outlive http.write_timeout: a handler that
// calls httpx.ExtendWriteDeadline(ctx, wait) gets a write deadline of
// write_timeout plus wait from now, wait capped at maxWait
// (events.poll_max_wait), so a poll never holds a connection longer than
// the two together.
func writeDeadlines(writeTimeout, maxWait time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		ctx := httpx.WithWriteDeadlineExtender(r.Context(), func(wait time.Duration) {
			wait = min(max(wait, 0), maxWait)
			// An error means the writer cannot move deadlines (a test
			// recorder): there is no connection to protect then.
			_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout + wait))
		})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// databaseLimits puts the bounds of a request's database work
// (database.query_timeout, database.acquire_timeout) into its context, so
// that a database that does not answer (frozen, not refusing) makes the
// request answer 503 unavailable instead of holding it until the write
// timeout (db.Limits). WebSocket connections inherit them from their
// upgrade: each statement of a subscription is bounded, its waiting for
// events is not database work and is not.
func databaseLimits(lim db.Limits, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(db.WithLimits(r.Context(), lim)))
	})
}

// inflight caps the requests one principal has in flight at once
// (http.max_concurrent_per_principal). The token buckets bound a
// principal's rate; this bounds its share of the server's workers and
// database connections at any moment. A request over the cap waits up to
// http.max_concurrent_wait for a slot, so a client's short burst is
// smoothed rather than refused; one that cannot get a slot in that time
// answers 429.
type inflight struct {
	max  int
	wait time.Duration
	mu   sync.Mutex
	m    map[string]*slots
}

type slots struct {
	sem   chan struct{}
	users int // requests holding or waiting for a slot
}

func newInflight(max int, wait time.Duration) *inflight {
	return &inflight{max: max, wait: wait, m: map[string]*slots{}}
}

// acquire takes a slot of id, waiting up to f.wait or until ctx ends.
func (f *inflight) acquire(ctx context.Context, id string) bool {
	f.mu.Lock()
	s, ok := f.m[id]
	if !ok {
		s = &slots{sem: make(chan struct{}, f.max)}
		f.m[id] = s
	}
	s.users++
	f.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(f.wait)
	defer t.Stop()
	select {
	case s.sem <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	f.done(id, s)
	return false
}

// release gives back a slot that acquire took.
func (f *inflight) release(id string) {
	f.mu.Lock()
	s := f.m[id]
	f.mu.Unlock()
	<-s.sem
	f.done(id, s)
}

// done forgets a principal nobody holds or waits for.
func (f *inflight) done(id string, s *slots) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.users--; s.users == 0 {
		delete(f.m, id)
	}
}

// heldSlotKey marks the context of a request that holds an in-flight slot
// of the principal it names, and of every request made in-process on its
// behalf (an MCP tool's API calls, whose contexts derive from the tool
// call's).
type heldSlotKey struct{}

// capConcurrency answers 429 rate_limited (reason too_many_concurrent)
// when the authenticated principal cannot get a slot in time. A request
// made in-process on behalf of one that holds a slot of the same
// principal takes none: the outer request is the one the client sent and
// the one that counts, and its inner calls waiting for slots of their own
// would refuse (or, at a cap of one, stall until http.max_concurrent_wait)
// a tool call of a principal at its cap.
func (s *Server) capConcurrency(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := identity.FromContext(r.Context())
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if held, _ := r.Context().Value(heldSlotKey{}).(string); held == p.ID {
			next.ServeHTTP(w, r)
			return
		}
		if !s.inflight.acquire(r.Context(), p.ID) {
			e := problem.RateLimit(time.Second)
			e.Reason = "too_many_concurrent"
			e.Detail = "too many requests of this principal in flight (http.max_concurrent_per_principal)"
			s.refuse(w, r, e)
			return
		}
		defer s.inflight.release(p.ID)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), heldSlotKey{}, p.ID)))
	})
}

// refuse answers err in the shape of the face: problem+json on REST, a
// GraphQL error document on /graphql, a JSON-RPC error on /mcp.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.URL.Path == mcpface.Path {
		mcpface.WriteProblem(w, r, err)
		return
	}
	if r.URL.Path != "/graphql" {
		httpx.WriteProblem(w, r, err)
		return
	}
	pe := problem.From("server.refuse", err)
	httpx.NoteCode(r.Context(), pe.Code)
	if pe.Code == problem.InternalError && pe.Cause() != nil {
		s.log.ErrorContext(r.Context(), "internal error", "correlation_id", httpx.CorrelationID(r.Context()), "error", pe.Cause().Error())
	}
	msg, ext := httpx.ProblemMessage(w, pe)
	b, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{"message": msg, "extensions": ext}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(pe.Code.Status())
	w.Write(b)
}
