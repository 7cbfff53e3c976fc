package db

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/platform/tracing"
)

// StatementSpans is the pgx tracer of tracing: one client span per
// statement (BEGIN and COMMIT included), a child of the span of the
// statement's context, named by its first keyword (SELECT, INSERT, WITH,
// ...). It records the statement text as db.query.text, which holds no
// user content because every value travels as a parameter, and never the
// arguments. A failed statement carries its SQLSTATE, not the server's
// message (which may quote a value). Statements outside a recorded span
// (background work, tracing off) cost one context lookup.
//
// Open registers it when Options.Spans is set; batches and COPY, which
// Bothy does not use, get no span.
type StatementSpans struct{}

var _ pgx.QueryTracer = StatementSpans{}

// TraceQueryStart starts the statement's span.
func (StatementSpans) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx
	}
	op := operationOf(data.SQL)
	ctx, span := tracing.Start(ctx, op, trace.SpanKindClient)
	span.SetAttributes(semconv.DBSystemNamePostgreSQL, semconv.DBOperationName(op), semconv.DBQueryText(data.SQL))
	return ctx
}

// TraceQueryEnd ends the statement's span with its outcome.
func (StatementSpans) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if data.Err != nil {
		code := "_OTHER"
		var pgErr *pgconn.PgError
		switch {
		case errors.As(data.Err, &pgErr):
			code = pgErr.Code
			span.SetAttributes(semconv.DBResponseStatusCode(code))
		case errors.Is(data.Err, context.Canceled):
			code = "canceled"
		case errors.Is(data.Err, context.DeadlineExceeded):
			code = "deadline_exceeded"
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(code))
		span.SetStatus(codes.Error, code)
	} else if data.CommandTag.Select() {
		span.SetAttributes(semconv.DBResponseReturnedRows(int(data.CommandTag.RowsAffected())))
	}
	span.End()
}

// operationOf returns the first keyword of a statement in upper case
// (squirrel and the stores write a keyword first; a comment or an empty
// text gives "SQL").
func operationOf(sql string) string {
	sql = strings.TrimLeft(sql, " \t\r\n(")
	end := strings.IndexAny(sql, " \t\r\n(;")
	if end < 0 {
		end = len(sql)
	}
	word := sql[:end]
	if word == "" || strings.HasPrefix(word, "--") || strings.HasPrefix(word, "/*") || len(word) > 16 {
		return "SQL"
	}
	return strings.ToUpper(word)
}
