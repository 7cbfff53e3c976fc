// Package httpx owns the HTTP plumbing shared by every face of the API: the
// correlation id, the problem+json writer, panic recovery, the request body
// cap, the access log and request metrics.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

type ctxKey int

const (
	keyCorrelation ctxKey = iota
	keyHints
)

// CorrelationHeader is the response header that names the request.
const CorrelationHeader = "Correlation-Id"

var correlationRE = regexp.MustCompile(`^[A-Za-z0-9._-]{8,64}$`)

// CorrelationID returns the correlation id of the request of ctx.
func CorrelationID(ctx context.Context) string {
	s, _ := ctx.Value(keyCorrelation).(string)
	return s
}

// Hints carries facts from deep in a request (a resolver) to the HTTP layer
// that writes the headers, such as the wait of a rate limit.
type Hints struct {
	// RetryAfter, when positive, becomes the Retry-After header.
	RetryAfter time.Duration
}

// HintsFrom returns the mutable hints of the request of ctx (a throwaway
// value outside a request).
func HintsFrom(ctx context.Context) *Hints {
	if h, ok := ctx.Value(keyHints).(*Hints); ok {
		return h
	}
	return &Hints{}
}

// Problem is the RFC 9457 body of every REST error.
type Problem struct {
	Type          string               `json:"type"`
	Title         string               `json:"title"`
	Status        int                  `json:"status"`
	Code          string               `json:"code"`
	Reason        string               `json:"reason,omitempty"`
	Detail        string               `json:"detail,omitempty"`
	Errors        []problem.FieldError `json:"errors,omitempty"`
	CorrelationID string               `json:"correlation_id"`
	Instance      string               `json:"instance"`
}

// ProblemOf renders p for the request r.
func ProblemOf(r *http.Request, p *problem.Error) Problem {
	return Problem{
		Type: p.Code.TypeURI(), Title: p.Code.Title(), Status: p.Code.Status(), Code: string(p.Code),
		Reason: p.Reason, Detail: p.Detail, Errors: p.Fields,
		CorrelationID: CorrelationID(r.Context()), Instance: r.URL.Path,
	}
}

// WriteProblem writes err as application/problem+json. Errors that are not
// problems become internal_error; their cause is logged with the correlation
// id and never shown.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := problem.From(err)
	if p.Code == problem.InternalError && p.Cause() != nil {
		slog.ErrorContext(r.Context(), "internal error", "correlation_id", CorrelationID(r.Context()), "error", p.Cause().Error())
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetrySeconds(p.RetryAfter))
	}
	body, _ := json.Marshal(ProblemOf(r, p))
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Code.Status())
	w.Write(body)
}

// RetrySeconds renders a wait as whole seconds, at least one.
func RetrySeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

// statusWriter records the status and applies hints before the first write.
type statusWriter struct {
	http.ResponseWriter
	status int
	hints  *Hints
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	s.status = code
	if s.hints.RetryAfter > 0 && s.Header().Get("Retry-After") == "" {
		s.Header().Set("Retry-After", RetrySeconds(s.hints.RetryAfter))
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and the WebSocket upgrade reach the
// connection's writer (to hijack it) through the wrapper.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush lets streaming transports flush through the wrapper.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Metrics are the request metrics of the HTTP layer.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the HTTP request metrics in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_http_requests_total",
			Help: "HTTP requests by face and status."}, []string{"face", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bothy_http_request_duration_seconds",
			Help: "HTTP request duration by face.", Buckets: prometheus.DefBuckets}, []string{"face"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// Face names the API face of a path for logs and metrics, without ids.
func Face(path string) string {
	switch {
	case path == "/graphql":
		return "graphql"
	case len(path) >= 8 && path[:8] == "/api/v1/":
		return "rest"
	case path == "/healthz" || path == "/readyz" || path == "/metrics":
		return "ops"
	default:
		return "static"
	}
}

// Chain wraps next with the outer layers every request passes: correlation
// id, hints, panic recovery, the access log and metrics. The log names no
// content and no path parameters, only the face, method, status, duration,
// correlation id and the principal id that authentication noted
// (NotePrincipal).
func Chain(next http.Handler, log *slog.Logger, m *Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cid := r.Header.Get(CorrelationHeader)
		if !correlationRE.MatchString(cid) {
			cid = ids.New()
		}
		hints := &Hints{}
		ctx := context.WithValue(r.Context(), keyCorrelation, cid)
		ctx = context.WithValue(ctx, keyHints, hints)
		w.Header().Set(CorrelationHeader, cid)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, hints: hints}
		face := Face(r.URL.Path)
		holder := &principalHolder{}
		ctx = context.WithValue(ctx, keyPrincipalHolder, holder)
		r = r.WithContext(ctx)
		defer func() {
			if rec := recover(); rec != nil {
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				log.ErrorContext(ctx, "panic", "correlation_id", cid, "panic", slog.AnyValue(rec).String(), "stack", string(debug.Stack()))
				if !sw.wrote {
					WriteProblem(sw, r, problem.Internal(errors.New("panic")))
				}
			}
			d := time.Since(start)
			if m != nil {
				m.requests.WithLabelValues(face, strconv.Itoa(sw.status)).Inc()
				m.duration.WithLabelValues(face).Observe(d.Seconds())
			}
			log.InfoContext(ctx, "request", "face", face, "method", r.Method, "status", sw.status,
				"duration_ms", d.Milliseconds(), "correlation_id", cid, "principal_id", holder.id)
		}()
		next.ServeHTTP(sw, r)
	})
}

type principalHolder struct{ id string }

const keyPrincipalHolder ctxKey = 100

// NotePrincipal records the authenticated principal id for the access log.
func NotePrincipal(ctx context.Context, id string) {
	if h, ok := ctx.Value(keyPrincipalHolder).(*principalHolder); ok {
		h.id = id
	}
}

// LimitBody reads the whole request body up to max bytes. A larger body
// answers 413 payload_too_large before any handler sees it; a smaller one is
// replaced by an in-memory copy, so handlers never read past the cap.
func LimitBody(max int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > max {
			WriteProblem(w, r, problem.Newf(problem.PayloadTooLarge, "", "the body exceeds http.max_body_bytes"))
			return
		}
		data, err := io.ReadAll(io.LimitReader(r.Body, max+1))
		r.Body.Close()
		if err != nil {
			WriteProblem(w, r, problem.Newf(problem.ValidationFailed, "", "the body could not be read"))
			return
		}
		if int64(len(data)) > max {
			WriteProblem(w, r, problem.Newf(problem.PayloadTooLarge, "", "the body exceeds http.max_body_bytes"))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(data))
		r.ContentLength = int64(len(data))
		next.ServeHTTP(w, r)
	})
}
