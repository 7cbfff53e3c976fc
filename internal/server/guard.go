package server

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"bothy.example.com/bothy/internal/identity"
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

// inflight caps the requests one principal has in flight at once
// (http.max_concurrent_per_principal). The token buckets bound a
// principal's rate; this bounds its share of the server's workers and
// database connections at any moment.
type inflight struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newInflight(max int) *inflight { return &inflight{max: max, n: map[string]int{}} }

func (f *inflight) acquire(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[id] >= f.max {
		return false
	}
	f.n[id]++
	return true
}

func (f *inflight) release(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[id] <= 1 {
		delete(f.n, id)
		return
	}
	f.n[id]--
}

// capConcurrency answers 429 rate_limited (reason too_many_concurrent)
// when the authenticated principal already has the maximum in flight.
func (s *Server) capConcurrency(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := identity.FromContext(r.Context())
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if !s.inflight.acquire(p.ID) {
			e := problem.RateLimit(time.Second)
			e.Reason = "too_many_concurrent"
			e.Detail = "too many requests of this principal in flight (http.max_concurrent_per_principal)"
			s.refuse(w, r, e)
			return
		}
		defer s.inflight.release(p.ID)
		next.ServeHTTP(w, r)
	})
}

// refuse answers err in the shape of the face: problem+json on REST, a
// GraphQL error document on /graphql.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	if r.URL.Path != "/graphql" {
		httpx.WriteProblem(w, r, err)
		return
	}
	pe := problem.From(err)
	if pe.Code == problem.InternalError && pe.Cause() != nil {
		s.log.ErrorContext(r.Context(), "internal error", "correlation_id", httpx.CorrelationID(r.Context()), "error", pe.Cause().Error())
	}
	ext := map[string]any{"code": string(pe.Code), "status": pe.Code.Status()}
	if pe.Reason != "" {
		ext["reason"] = pe.Reason
	}
	msg := pe.Detail
	if msg == "" {
		msg = pe.Code.Title()
	}
	if pe.RetryAfter > 0 {
		w.Header().Set("Retry-After", httpx.RetrySeconds(pe.RetryAfter))
		ext["retryAfterSeconds"] = httpx.RetrySeconds(pe.RetryAfter)
	}
	b, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{"message": msg, "extensions": ext}}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(pe.Code.Status())
	w.Write(b)
}
