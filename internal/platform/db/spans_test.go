package db_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// countingTracer counts the statements it sees.
type countingTracer struct{ n atomic.Int64 }

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TestStatementSpans: with Spans, a statement inside a recorded span is a
// child span named by its keyword with its text and never its arguments;
// a failed one carries its SQLSTATE, not the server's message (which
// quotes the value); a statement outside any span makes none; a tracer of
// the caller still sees every statement.
func TestStatementSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	counter := &countingTracer{}
	pool, err := db.Open(ctx, db.Options{URL: pgtest.URL(t), MaxConns: 2, Tracer: counter, Spans: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	before := counter.n.Load()

	const secret = "argument-not-recorded-42"
	if _, err := pool.Exec(ctx, `SELECT length($1::text)`, secret); err != nil {
		t.Fatal(err)
	}
	rctx, parent := tp.Tracer("test").Start(ctx, "request")
	var n int
	if err := pool.QueryRow(rctx, `SELECT length($1::text)`, secret).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(rctx, `SELECT $1::int`, secret); err == nil {
		t.Fatal("a text as an integer did not fail")
	}
	parent.End()

	if got := counter.n.Load() - before; got != 3 {
		t.Fatalf("the caller's tracer saw %d statements, want 3", got)
	}
	var stmts []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != "request" {
			stmts = append(stmts, s)
		}
	}
	if len(stmts) != 2 {
		t.Fatalf("%d statement spans, want the two inside the request", len(stmts))
	}
	for i, s := range stmts {
		checkStatementSpan(t, i, s, parent.SpanContext().SpanID(), secret)
	}
}

// checkStatementSpan checks the i-th statement span s of TestStatementSpans:
// a child of the request span parentID named by its keyword with the
// statement's text, no attribute carrying the argument secret, no event
// (an error's text may quote a value), and the outcome of statement i.
func checkStatementSpan(t *testing.T, i int, s sdktrace.ReadOnlySpan, parentID trace.SpanID, secret string) {
	t.Helper()
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if s.Name() != "SELECT" || s.Parent().SpanID() != parentID ||
		attrs["db.system.name"] != "postgresql" || attrs["db.operation.name"] != "SELECT" || !strings.HasPrefix(attrs["db.query.text"], "SELECT ") {
		t.Errorf("statement span %q under %s with %v", s.Name(), s.Parent().SpanID(), attrs)
	}
	for k, v := range attrs {
		if strings.Contains(v, secret) {
			t.Errorf("attribute %s carries an argument: %q", k, v)
		}
	}
	for _, ev := range s.Events() {
		t.Errorf("statement span has event %q (an error's text may quote a value)", ev.Name)
	}
	checkStatementOutcome(t, i, s, attrs)
}

// checkStatementOutcome checks the outcome statement span s (i-th, with
// attributes attrs) records: the first returned one row and is no error,
// the second failed with its SQLSTATE and not the server's message.
func checkStatementOutcome(t *testing.T, i int, s sdktrace.ReadOnlySpan, attrs map[string]string) {
	t.Helper()
	switch i {
	case 0:
		if attrs["db.response.returned_rows"] != "1" || s.Status().Code.String() != "Unset" {
			t.Errorf("first statement: %v, status %v", attrs, s.Status())
		}
	case 1:
		if attrs["error.type"] != "22P02" || attrs["db.response.status_code"] != "22P02" || s.Status().Description != "22P02" {
			t.Errorf("failed statement: %v, status %v", attrs, s.Status())
		}
	}
}
