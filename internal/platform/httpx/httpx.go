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
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

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

// RequestIDHeader is the request id header that proxies and load balancers
// send (nginx's $request_id, AWS, Heroku); a request without
// Correlation-Id takes its id from it.
const RequestIDHeader = "X-Request-Id"

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
	// Operation names the GraphQL operation or REST operationId of the
	// request, for the access log and the request metrics.
	Operation string
	// Action is the authorization action a REST route decides (its entry
	// in the route table), for the access log; empty for GraphQL, whose
	// one request may decide several.
	Action string
	// Code is the problem code of the first error of the answer (a REST
	// problem or a GraphQL error), empty when the answer has none.
	Code string
	// LongPoll marks a request that may wait for events by design; it is
	// measured apart from the request latency.
	LongPoll bool
	// Unavailable marks an answer that failed because a dependency (the
	// database) does not answer: /graphql then answers 503 too.
	Unavailable bool
	// PlainHTTP marks a GraphQL request that came by HTTP POST or GET on
	// /graphql (not over the WebSocket transport).
	PlainHTTP bool
	// Refused marks a GraphQL request refused before it ran for what it
	// asks, not how it is written (a subscription over plain HTTP): /graphql
	// answers 400 whatever the media type.
	Refused bool
	// Started is when the request came in (zero outside an HTTP request,
	// as for a subscription's events).
	Started time.Time
}

// NoteOperation records the operation name of the request of ctx unless one
// is recorded already.
func NoteOperation(ctx context.Context, name string) {
	if h := HintsFrom(ctx); h.Operation == "" {
		h.Operation = name
	}
}

// NoteAction records the authorization action of the request of ctx
// unless one is recorded already.
func NoteAction(ctx context.Context, action string) {
	if h := HintsFrom(ctx); h.Action == "" {
		h.Action = action
	}
}

// NoteCode records the problem code of the answer of the request of ctx
// unless one is recorded already (the first error names the outcome).
func NoteCode(ctx context.Context, code problem.Code) {
	if h := HintsFrom(ctx); h.Code == "" {
		h.Code = string(code)
	}
}

// WithOwnHints returns ctx with hints of its own, for work that runs
// beside its request rather than as part of it: each event of a WebSocket
// subscription resolves in its own goroutine, and writing the connection
// request's hints from there would race its access log.
func WithOwnHints(ctx context.Context) context.Context {
	return context.WithValue(ctx, keyHints, &Hints{})
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
	Type         string               `json:"type"`
	Title        string               `json:"title"`
	Status       int                  `json:"status"`
	Code         string               `json:"code"`
	Reason       string               `json:"reason,omitempty"`
	Detail       string               `json:"detail,omitempty"`
	Errors       []problem.FieldError `json:"errors,omitempty"`
	OldestCursor string               `json:"oldest_cursor,omitempty"`
	// CurrentVersion is the live box's version of a live_version conflict.
	CurrentVersion *int   `json:"current_version,omitempty"`
	CorrelationID  string `json:"correlation_id"`
	Instance       string `json:"instance"`
}

// ProblemOf renders p for the request r.
func ProblemOf(r *http.Request, p *problem.Error) Problem {
	return Problem{
		Type: p.Code.TypeURI(), Title: p.Code.Title(), Status: p.Code.Status(), Code: string(p.Code),
		Reason: p.Reason, Detail: p.Detail, Errors: p.Fields, OldestCursor: p.OldestCursor, CurrentVersion: p.CurrentVersion,
		CorrelationID: CorrelationID(r.Context()), Instance: r.URL.Path,
	}
}

// WriteProblem writes err as application/problem+json. Errors that are not
// problems become internal_error; their cause is logged with the correlation
// id and never shown.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := problem.From("httpx.writeProblem", err)
	NoteCode(r.Context(), p.Code)
	if p.Code == problem.InternalError && p.Cause() != nil {
		loggerFrom(r.Context()).ErrorContext(r.Context(), "internal error", "correlation_id", CorrelationID(r.Context()), "error", p.Cause().Error())
	}
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetrySeconds(p.RetryAfter))
	}
	body, _ := json.Marshal(ProblemOf(r, p))
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Code.Status())
	w.Write(body)
}

// ProblemMessage returns the message and the extensions of a refusal in
// the shape of a GraphQL error's extensions (and of a JSON-RPC error's
// data): code, status, reason and retryAfterSeconds; a problem that asks
// for a wait also sets Retry-After on w, as every face does.
func ProblemMessage(w http.ResponseWriter, pe *problem.Error) (string, map[string]any) {
	ext := map[string]any{"code": string(pe.Code), "status": pe.Code.Status()}
	if pe.Reason != "" {
		ext["reason"] = pe.Reason
	}
	msg := pe.Detail
	if msg == "" {
		msg = pe.Code.Title()
	}
	if pe.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetrySeconds(pe.RetryAfter))
		ext["retryAfterSeconds"] = RetrySecondsInt(pe.RetryAfter)
	}
	return msg, ext
}

// RetrySeconds renders a wait as whole seconds, at least one.
func RetrySeconds(d time.Duration) string {
	return strconv.Itoa(RetrySecondsInt(d))
}

// RetrySecondsInt is RetrySeconds as a number, for retryAfterSeconds in
// GraphQL error extensions.
func RetrySecondsInt(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
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

// Unwrap lets http.ResponseController (to move the write deadline of a long
// poll) and the WebSocket upgrade (to hijack the connection) reach the
// connection's writer through the wrapper.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush lets streaming transports flush through the wrapper.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Metrics are the request metrics of the HTTP layer.
type Metrics struct {
	requests     *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	operations   *prometheus.CounterVec
	opDuration   *prometheus.HistogramVec
	longPolls    *prometheus.CounterVec
	longPollTime prometheus.Histogram
	waiting      prometheus.Gauge

	mu     sync.Mutex
	names  map[string]string // the label values, each its own copy
	maxOps int
}

// otherOperation is the operation label of the operations beyond the
// bound of distinct names.
const otherOperation = "other"

// NewMetrics registers the HTTP request metrics in reg. At most maxOps
// distinct operation names become label values; later ones count as
// "other", because GraphQL operation names are chosen by clients.
func NewMetrics(reg prometheus.Registerer, maxOps int) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_http_requests_total",
			Help: "HTTP requests by face and status."}, []string{"face", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bothy_http_request_duration_seconds",
			Help: "HTTP request duration by face, long polls excluded.", Buckets: prometheus.DefBuckets}, []string{"face"}),
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_operations_total",
			Help: "API requests by face, operation (GraphQL operation name or REST operationId) and outcome code (ok or the problem code of the first error)."},
			[]string{"face", "operation", "code"}),
		opDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "bothy_operation_duration_seconds",
			Help: "API request duration by face and operation, long polls excluded.", Buckets: prometheus.DefBuckets},
			[]string{"face", "operation"}),
		longPolls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bothy_long_polls_total",
			Help: "Finished long polls (agentEvents, pollAgentEvents) by outcome code."}, []string{"code"}),
		longPollTime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "bothy_long_poll_duration_seconds",
			Help: "Duration of long polls, the wait included.", Buckets: []float64{0.01, 0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 45, 60, 120}}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "bothy_long_polls_waiting",
			Help: "Long polls in progress."}),
		names:  map[string]string{},
		maxOps: maxOps,
	}
	reg.MustRegister(m.requests, m.duration, m.operations, m.opDuration, m.longPolls, m.longPollTime, m.waiting)
	// Every family is exported from the start, at zero: an alert on a
	// rate sees the first request, not only the second.
	for _, face := range []string{"graphql", "rest", "mcp", "ops", "static"} {
		m.requests.WithLabelValues(face, "200").Add(0)
		m.duration.WithLabelValues(face)
	}
	for _, face := range []string{"graphql", "rest"} {
		m.operations.WithLabelValues(face, otherOperation, "ok").Add(0)
		m.opDuration.WithLabelValues(face, otherOperation)
	}
	m.longPolls.WithLabelValues("ok").Add(0)
	return m
}

// LongPollWaiting adds delta to the gauge of long polls in progress.
func (m *Metrics) LongPollWaiting(delta float64) { m.waiting.Add(delta) }

// maxOperationLabelBytes is the longest operation name that becomes a
// label value; a longer one counts as "other". GraphQL names have no length
// limit, and maxOps names near http.max_body_bytes would keep that much
// memory in the label set and in every series labelled with them.
const maxOperationLabelBytes = 128

// opLabel bounds the operation label values: at most maxOps names of at
// most maxOperationLabelBytes each. A name kept is a copy: a GraphQL
// operation name is a substring of its document's text (the parser slices
// the text), and keeping the substring kept the whole document, up to the
// body limit, for the life of the process.
func (m *Metrics) opLabel(name string) string {
	if name == "" {
		return "none"
	}
	if len(name) > maxOperationLabelBytes {
		return otherOperation
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if own, ok := m.names[name]; ok {
		return own
	}
	if len(m.names) >= m.maxOps {
		return otherOperation
	}
	own := strings.Clone(name)
	m.names[own] = own
	return own
}

// observe records one finished request.
func (m *Metrics) observe(face string, status int, h *Hints, d time.Duration) {
	m.requests.WithLabelValues(face, strconv.Itoa(status)).Inc()
	code := Outcome(status, h.Code)
	if h.LongPoll {
		m.longPolls.WithLabelValues(code).Inc()
		m.longPollTime.Observe(d.Seconds())
	} else {
		m.duration.WithLabelValues(face).Observe(d.Seconds())
	}
	if face == "graphql" || face == "rest" {
		op := m.opLabel(h.Operation)
		m.operations.WithLabelValues(face, op, code).Inc()
		if !h.LongPoll {
			m.opDuration.WithLabelValues(face, op).Observe(d.Seconds())
		}
	}
}

// Outcome names the outcome of an answer: the noted problem code, else
// "ok" below 400 and "http_<status>" for an error without a problem code.
func Outcome(status int, code string) string {
	switch {
	case code != "":
		return code
	case status < 400:
		return "ok"
	default:
		return "http_" + strconv.Itoa(status)
	}
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
	case path == "/mcp" || path == "/.well-known/oauth-protected-resource":
		return "mcp"
	default:
		return "static"
	}
}

// Options configure ChainWith.
type Options struct {
	Log     *slog.Logger
	Metrics *Metrics
	// Proxies are the trusted reverse proxies (http.trusted_proxies).
	Proxies Proxies
}

// Chain wraps next with the outer layers every request passes (ChainWith
// without trusted proxies).
func Chain(next http.Handler, log *slog.Logger, m *Metrics) http.Handler {
	return ChainWith(next, Options{Log: log, Metrics: m})
}

// ChainWith wraps next with the outer layers every request passes:
// correlation id, hints, panic recovery, the access log and metrics. The log
// names no content and no path parameters, only the face, operation, method,
// status, outcome code, duration, correlation id, client address and the
// principal id that authentication noted (NotePrincipal). Probes and
// scrapes (face ops) are logged at debug.
func ChainWith(next http.Handler, o Options) http.Handler {
	log, m := o.Log, o.Metrics
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The client's own id first, then a proxy's, else a new one; an id
		// outside 8 to 64 of [A-Za-z0-9._-] is not kept (it would reach
		// the logs as it came).
		cid := r.Header.Get(CorrelationHeader)
		if !correlationRE.MatchString(cid) {
			cid = r.Header.Get(RequestIDHeader)
		}
		if !correlationRE.MatchString(cid) {
			cid = ids.New()
		}
		hints := &Hints{Started: start}
		ctx := context.WithValue(r.Context(), keyCorrelation, cid)
		ctx = context.WithValue(ctx, keyHints, hints)
		ctx = context.WithValue(ctx, keyLogger, log)
		w.Header().Set(CorrelationHeader, cid)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK, hints: hints}
		face := Face(r.URL.Path)
		holder := &principalHolder{}
		ctx = context.WithValue(ctx, keyPrincipalHolder, holder)
		r = r.WithContext(ctx)
		defer func() {
			if rec := recover(); rec != nil {
				if e, ok := rec.(error); ok && errors.Is(e, http.ErrAbortHandler) {
					panic(rec)
				}
				log.ErrorContext(ctx, "panic", "correlation_id", cid, "panic", slog.AnyValue(rec).String(), "stack", string(debug.Stack()))
				if !sw.wrote {
					WriteProblem(sw, r, problem.Internal("httpx.chainWith", errors.New("panic")))
				}
			}
			d := time.Since(start)
			if m != nil {
				m.observe(face, sw.status, hints, d)
			}
			level := slog.LevelInfo
			if face == "ops" {
				level = slog.LevelDebug
			}
			log.Log(ctx, level, "request", "face", face, "operation", hints.Operation, "action", hints.Action, "method", r.Method,
				"status", sw.status, "code", Outcome(sw.status, hints.Code), "duration_ms", d.Milliseconds(),
				"correlation_id", cid, "client", o.Proxies.Client(r), "principal_id", holder.id)
		}()
		next.ServeHTTP(sw, r)
	})
}

type principalHolder struct{ id string }

const keyPrincipalHolder ctxKey = 100

// PrincipalIDKey is the attribute of a request span that holds the
// authenticated principal's id (never the token).
const PrincipalIDKey = attribute.Key("bothy.principal_id")

// NotePrincipal records the authenticated principal id for the access log
// and on the request's span. Authentication calls it before any operation
// starts a span of its own, so the span of ctx is the request's; with
// tracing off that span does not record and nothing is set.
func NotePrincipal(ctx context.Context, id string) {
	if h, ok := ctx.Value(keyPrincipalHolder).(*principalHolder); ok {
		h.id = id
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(PrincipalIDKey.String(id))
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

const keyDeadline ctxKey = 101

// WithWriteDeadlineExtender returns ctx carrying extend, which moves the
// request's write deadline so that it allows an extra wait.
func WithWriteDeadlineExtender(ctx context.Context, extend func(wait time.Duration)) context.Context {
	return context.WithValue(ctx, keyDeadline, extend)
}

// ExtendWriteDeadline lets a handler that waits on purpose (a long poll)
// tell the HTTP layer: the answer may come wait later than http.write_timeout
// alone allows. Outside a request it does nothing.
func ExtendWriteDeadline(ctx context.Context, wait time.Duration) {
	if f, ok := ctx.Value(keyDeadline).(func(time.Duration)); ok {
		f(wait)
	}
}

const keyLogger ctxKey = 102

// loggerFrom returns the server's logger that Chain put into ctx, so that
// every line goes through the one JSON logger, not slog's default.
func loggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(keyLogger).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}
