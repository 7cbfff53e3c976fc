package tracing

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/platform/httpx"
)

// CorrelationIDKey is the attribute of a request span that holds the
// request's correlation id (the Correlation-Id response header), which the
// access log and problem bodies carry too.
const CorrelationIDKey = attribute.Key("bothy.correlation_id")

// Handler returns next with one server span per request, started from p,
// around everything next does: it continues the trace of an incoming W3C
// traceparent header and carries the method, the route (the ServeMux
// pattern that Route noted), the status code and the correlation id (read
// from the Correlation-Id header that next sets on the answer). The path
// itself is not recorded: like the access log, a span names no path
// parameters. Probes and scrapes (/healthz, /readyz, /metrics) get no
// span. When p is off, Handler returns next itself.
func Handler(p *Provider, next http.Handler) http.Handler {
	if !p.Enabled() {
		return next
	}
	tracer := p.TracerProvider().Tracer(ScopeName)
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if httpx.Face(r.URL.Path) == "ops" {
			next.ServeHTTP(w, r)
			return
		}
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(withRequestSpan(ctx, span)))
		if id := w.Header().Get(httpx.CorrelationHeader); id != "" {
			span.SetAttributes(CorrelationIDKey.String(id))
		}
		status := sw.status
		if status == 0 {
			// The handler returned without writing: net/http answers 200.
			status = http.StatusOK
		}
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			// 4xx answers are the client's outcome, not the server's
			// error (semantic conventions for server spans).
			span.SetStatus(codes.Error, "")
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		}
	})
}

// Route returns mux with the route it chose noted on the request span:
// the span's name becomes "METHOD route" and http.route the pattern
// without its method ("/api/v1/threads/{id}/messages"). The catch-all
// pattern "/" (an unknown path) is no route. ServeMux writes the pattern
// into the request it was given, so it is read after mux returns.
func Route(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mux.ServeHTTP(w, r)
		span := trace.SpanFromContext(r.Context())
		if !span.IsRecording() {
			return
		}
		if route := routeOf(r.Pattern); route != "" {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(semconv.HTTPRoute(route))
		}
	})
}

// routeOf returns the path template of a ServeMux pattern: without its
// method and host, "{$}" dropped; "" for the catch-all "/".
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = strings.TrimLeft(pattern[i+1:], " ")
	}
	if i := strings.IndexByte(pattern, '/'); i > 0 {
		pattern = pattern[i:]
	}
	pattern = strings.TrimSuffix(pattern, "{$}")
	if pattern == "/" || pattern == "" {
		return ""
	}
	return pattern
}

// statusWriter records the status of the answer for the request span.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first final status (a WebSocket upgrade's 101
// counts as final: the connection is hijacked after it).
func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records 200 when no status was written before.
func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and the WebSocket upgrade reach the
// connection's writer (to move deadlines, flush and hijack).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush lets streaming answers flush through the wrapper.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
