package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

type providerKey struct{}

// WithProvider returns ctx carrying p for StartRoot: the context a server
// hands its background work (the run sweeper), which has no request span
// to start from. When p is off it returns ctx unchanged.
func WithProvider(ctx context.Context, p *Provider) context.Context {
	if !p.Enabled() {
		return ctx
	}
	return context.WithValue(ctx, providerKey{}, p)
}

// StartRoot starts a span called name that begins a trace of its own,
// made by the provider of ctx (WithProvider), and returns it with a
// context carrying it; the caller ends the span. Spans started below it
// with Start join that trace. Without a provider in ctx (tracing off) it
// returns ctx unchanged and a span that does nothing.
func StartRoot(ctx context.Context, name string) (context.Context, trace.Span) {
	p, _ := ctx.Value(providerKey{}).(*Provider)
	if !p.Enabled() {
		return ctx, noop.Span{}
	}
	return p.sdk.Tracer(ScopeName).Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal))
}

// LinkTo returns a link to the span a W3C traceparent names (a run's
// trace context), and false when traceparent is empty or malformed.
// Background work on a run links to the run's trace instead of joining it:
// the sweep is its own trace, about many runs.
func LinkTo(traceparent string) (trace.Link, bool) {
	if traceparent == "" {
		return trace.Link{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}
