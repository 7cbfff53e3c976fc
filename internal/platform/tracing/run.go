package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/platform/httpx"
)

// The attributes that name what a request concerns. They carry ids only:
// never message content, tokens or other values a client wrote.
const (
	// PrincipalIDKey is the authenticated principal of a request (noted
	// by authentication through httpx.NotePrincipal).
	PrincipalIDKey = httpx.PrincipalIDKey
	// RunIDKey is the run a request acted on or read.
	RunIDKey = attribute.Key("bothy.run_id")
	// ThreadIDKey is the thread a request acted on or read.
	ThreadIDKey = attribute.Key("bothy.thread_id")
)

// requestSpanKey holds the request span in the request's context, so that
// Note reaches it from below the operation's span.
type requestSpanKey struct{}

// withRequestSpan returns ctx carrying span as the request span.
func withRequestSpan(ctx context.Context, span trace.Span) context.Context {
	return context.WithValue(ctx, requestSpanKey{}, span)
}

// NoteRun records on the request span, and on the span of ctx when that is
// another one (the GraphQL operation's, below a resolver), which run and
// thread the request concerns; an empty id is left out. Call it with ids
// the server read or decided, not with a client's raw argument, which the
// server may yet refuse. When tracing is off or the request is not
// sampled it does nothing.
func NoteRun(ctx context.Context, runID, threadID string) {
	inner := trace.SpanFromContext(ctx)
	outer, _ := ctx.Value(requestSpanKey{}).(trace.Span)
	if !inner.IsRecording() && (outer == nil || !outer.IsRecording()) {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 2)
	if runID != "" {
		attrs = append(attrs, RunIDKey.String(runID))
	}
	if threadID != "" {
		attrs = append(attrs, ThreadIDKey.String(threadID))
	}
	if len(attrs) == 0 {
		return
	}
	if outer != nil {
		outer.SetAttributes(attrs...)
	}
	if inner != outer {
		inner.SetAttributes(attrs...)
	}
}

// Traceparent returns the W3C traceparent of the span of ctx, which a
// later call continues that trace with, or "" when that span does not
// record (tracing is off, the trace is not sampled, or ctx is outside any
// request): an unsampled trace is not worth continuing, and nothing is
// stored for it.
func Traceparent(ctx context.Context) string {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}
