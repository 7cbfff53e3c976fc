package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/tracing"
	"bothy.example.com/bothy/internal/platform/tracing/tracingtest"
)

// TestProviderFromConfig: the configuration decides whether spans are
// exported, and where; a URL that cannot work stops the start with an
// error that names the key.
func TestProviderFromConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		keys    map[string]string
		enabled bool
		url     string
		wantErr string
	}{
		{name: "default is off", keys: nil},
		{name: "base URL", keys: map[string]string{config.TracingOTLPEndpoint: "http://collector.example.com:4318"},
			enabled: true, url: "http://collector.example.com:4318/v1/traces"},
		{name: "trailing slash", keys: map[string]string{config.TracingOTLPEndpoint: "http://collector.example.com:4318/"},
			enabled: true, url: "http://collector.example.com:4318/v1/traces"},
		{name: "path prefix over https", keys: map[string]string{config.TracingOTLPEndpoint: "https://gateway.example.com/otlp"},
			enabled: true, url: "https://gateway.example.com/otlp/v1/traces"},
		{name: "no scheme", keys: map[string]string{config.TracingOTLPEndpoint: "collector.example.com:4318"},
			wantErr: "tracing.otlp_endpoint"},
		{name: "other scheme", keys: map[string]string{config.TracingOTLPEndpoint: "grpc://collector.example.com:4317"},
			wantErr: "tracing.otlp_endpoint"},
		{name: "credentials", keys: map[string]string{config.TracingOTLPEndpoint: "https://user:secret@collector.example.com"},
			wantErr: "OTEL_EXPORTER_OTLP_HEADERS"},
		{name: "query", keys: map[string]string{config.TracingOTLPEndpoint: "https://collector.example.com/?key=1"},
			wantErr: "no query"},
		{name: "empty service name", keys: map[string]string{config.TracingOTLPEndpoint: "http://collector.example.com:4318", config.TracingServiceName: " "},
			wantErr: "tracing.service_name"},
		{name: "service name without endpoint is off", keys: map[string]string{config.TracingServiceName: "chat"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := config.Defaults()
			for k, v := range tc.keys {
				cfg = cfg.MustWith(k, v)
			}
			p, err := tracing.New(tracing.OptionsFrom(cfg, "test", nil))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled() != tc.enabled || tracing.Enabled(cfg) != tc.enabled || p.URL != tc.url {
				t.Fatalf("enabled %v (config says %v), url %q; want %v, %q", p.Enabled(), tracing.Enabled(cfg), p.URL, tc.enabled, tc.url)
			}
			if _, isSDK := p.TracerProvider().(interface{ ForceFlush(context.Context) error }); isSDK != tc.enabled {
				t.Fatalf("tracer provider %T with tracing enabled %v", p.TracerProvider(), tc.enabled)
			}
		})
	}
}

// TestOffCostsNothing: with tracing off the request layer is the handler
// itself, an incoming traceparent starts nothing, an inner span is free,
// and nothing reaches a collector. Not parallel: AllocsPerRun counts the
// whole process.
func TestOffCostsNothing(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	p, err := tracing.New(tracing.Options{Endpoint: "", ServiceName: "bothy"})
	if err != nil {
		t.Fatal(err)
	}
	sawSpan := false
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawSpan = trace.SpanFromContext(r.Context()).SpanContext().IsValid()
		_, span := tracing.Start(r.Context(), "inner", trace.SpanKindInternal)
		sawSpan = sawSpan || span.IsRecording()
		span.End()
	})
	h := tracing.Handler(p, next)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/spaces", nil)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if sawSpan {
		t.Fatal("tracing off, yet the handler ran inside a span")
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		_, span := tracing.Start(ctx, "inner", trace.SpanKindInternal)
		span.End()
	}); n != 0 {
		t.Fatalf("an inner span outside tracing allocates %v times", n)
	}
	if err := p.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := recv.Posts(); n != 0 {
		t.Fatalf("tracing off, yet the collector got %d exports", n)
	}
}

// TestRequestSpanExported: a request span continues the caller's trace,
// is named by its route and carries method, status and correlation id; an
// inner span is its child; probes get none; the exporter's gzip protobuf
// reaches the receiver at /v1/traces.
func TestRequestSpanExported(t *testing.T) {
	t.Parallel()
	recv := tracingtest.NewReceiver(t)
	p, err := tracing.New(tracing.Options{Endpoint: recv.URL, ServiceName: "bothy-test", Version: "v9.9.9"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	mux := http.NewServeMux()
	mux.HandleFunc("POST /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		_, span := tracing.Start(r.Context(), "inner", trace.SpanKindInternal)
		span.End()
		w.WriteHeader(http.StatusCreated)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	// The correlation layer sets the header before it calls the rest, as
	// httpx.ChainWith does.
	h := tracing.Handler(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Correlation-Id", "corr-unit-0001")
		tracing.Route(mux).ServeHTTP(w, r)
	}))
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req := httptest.NewRequest(http.MethodPost, "/things/42", nil)
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusCreated {
		t.Fatalf("status %d", rec.Code)
	}
	if err := p.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rej := recv.Rejected(); len(rej) > 0 {
		t.Fatalf("receiver rejected %v", rej)
	}
	checkExportedSpans(t, recv.Spans(), traceID, parentID)
}

// checkExportedSpans checks the spans the receiver got for one request
// to POST /things/42 under the caller's trace traceID and span parentID:
// the request span, named by its route, continues that trace and
// carries method, route, status and correlation id, the inner span is
// its child, and both name the service and the scope.
func checkExportedSpans(t *testing.T, spans []tracingtest.Span, traceID, parentID string) {
	t.Helper()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want the request's and the inner one: %+v", len(spans), spans)
	}
	var server, inner tracingtest.Span
	for _, s := range spans {
		if s.Name == "inner" {
			inner = s
		} else {
			server = s
		}
	}
	want := map[string]string{"http.request.method": "POST", "http.route": "/things/{id}",
		"http.response.status_code": "201", "bothy.correlation_id": "corr-unit-0001"}
	for k, v := range want {
		if server.Attributes[k] != v {
			t.Errorf("request span %s = %q, want %q (all: %v)", k, server.Attributes[k], v, server.Attributes)
		}
	}
	if server.Name != "POST /things/{id}" || server.TraceID != traceID || server.ParentSpanID != parentID {
		t.Errorf("request span %q in trace %s under %s; want POST /things/{id} continuing %s under %s",
			server.Name, server.TraceID, server.ParentSpanID, traceID, parentID)
	}
	if inner.TraceID != traceID || inner.ParentSpanID != server.SpanID {
		t.Errorf("inner span in trace %s under %s, want the request span %s", inner.TraceID, inner.ParentSpanID, server.SpanID)
	}
	if server.Resource["service.name"] != "bothy-test" || server.Resource["service.version"] != "v9.9.9" || server.Scope != tracing.ScopeName {
		t.Errorf("resource %v, scope %q", server.Resource, server.Scope)
	}
}

// TestRunContextHelpers: outside a recording span there is no traceparent
// to store and StartRoot, without a provider, starts nothing; LinkTo
// accepts only a well-formed traceparent, the form a run stores.
func TestRunContextHelpers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if tp := tracing.Traceparent(ctx); tp != "" {
		t.Errorf("Traceparent outside a request = %q, want empty", tp)
	}
	off, err := tracing.New(tracing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rctx, span := tracing.StartRoot(tracing.WithProvider(ctx, off), "runs.sweep")
	if span.IsRecording() || rctx != ctx {
		t.Error("StartRoot with tracing off started a span")
	}
	tracing.NoteRun(ctx, "01a23f42-e54e-7822-afc0-4f68025031a6", "") // no span: must not panic
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	link, ok := tracing.LinkTo(tp)
	if !ok || link.SpanContext.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || link.SpanContext.SpanID().String() != "b7ad6b7169203331" {
		t.Errorf("LinkTo(%q) = %v, %v", tp, link.SpanContext, ok)
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-b7ad6b7169203331-01", "garbage"} {
		if _, ok := tracing.LinkTo(bad); ok {
			t.Errorf("LinkTo(%q) accepted", bad)
		}
	}
}
