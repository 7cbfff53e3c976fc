package server

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/tracing"
)

// OperationSpans is the gqlgen extension that makes one span per GraphQL
// operation, a child of the request's span: named "query Name" (the type,
// then the operation name when there is one) with graphql.operation.type
// and graphql.operation.name. The REST shim runs its stored operations
// through the same executor, so a REST request has one too, named by its
// operationId. The document and the variables are not recorded: a literal
// in a document may be content. The span ends with the answer (for a
// subscription: when its stream ends) and carries the number of errors
// and the code of the first; a code of a 5xx answer marks it an error.
//
// An operation refused before it runs (it does not parse or validate) has
// no span; its request span has the status. Outside a traced request the
// extension costs one context lookup.
type OperationSpans struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationInterceptor
} = OperationSpans{}

// The attributes of an operation span besides the semantic conventions'.
const (
	graphQLErrorsKey    = attribute.Key("bothy.graphql.errors")
	graphQLErrorCodeKey = attribute.Key("bothy.graphql.error_code")
)

// ExtensionName implements graphql.HandlerExtension.
func (OperationSpans) ExtensionName() string { return "OperationSpans" }

// Validate implements graphql.HandlerExtension; every schema is fine.
func (OperationSpans) Validate(graphql.ExecutableSchema) error { return nil }

// InterceptOperation starts the operation's span and ends it with the
// operation's last answer.
func (OperationSpans) InterceptOperation(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return next(ctx)
	}
	kind, name := operationOf(graphql.GetOperationContext(ctx))
	spanName := kind
	if name != "" {
		spanName += " " + name
	}
	ctx, span := tracing.Start(ctx, spanName, trace.SpanKindInternal)
	span.SetAttributes(semconv.GraphQLOperationTypeKey.String(kind))
	if name != "" {
		span.SetAttributes(semconv.GraphQLOperationName(name))
	}
	responses := next(ctx)
	end := &operationSpanEnd{span: span, stream: kind == "subscription"}
	// The transport calls the handler from one goroutine: once for a query
	// or mutation, once per event and a last time (nil) for a
	// subscription.
	return func(ctx context.Context) *graphql.Response {
		resp := responses(ctx)
		end.observe(resp)
		return resp
	}
}

// operationOf returns the type and the name of the operation oc runs, as
// its span carries them: the request's operation name, else the
// document's (spanOperationName), and a query when no operation was
// selected.
func operationOf(oc *graphql.OperationContext) (kind, name string) {
	kind, name = "query", oc.OperationName
	if oc.Operation != nil {
		kind = string(oc.Operation.Operation)
		if name == "" {
			name = oc.Operation.Name
		}
	}
	return kind, spanOperationName(name)
}

// operationSpanEnd ends the span of an operation with its last answer,
// with the errors of all its answers: the only answer of a query or
// mutation, the nil that ends a subscription's stream.
type operationSpanEnd struct {
	span   trace.Span
	stream bool
	// errs counts the errors of the answers so far; firstCode is the first
	// code among them.
	errs      int
	firstCode string
	ended     bool
}

// observe counts the errors of resp and ends the span when resp is the
// operation's last answer; answers after that change nothing.
func (e *operationSpanEnd) observe(resp *graphql.Response) {
	if e.ended {
		return
	}
	if resp != nil {
		for _, err := range resp.Errors {
			if code, ok := err.Extensions["code"].(string); ok && e.firstCode == "" {
				e.firstCode = code
			}
		}
		e.errs += len(resp.Errors)
	}
	if resp != nil && e.stream {
		return
	}
	e.ended = true
	if e.errs > 0 {
		e.span.SetAttributes(graphQLErrorsKey.Int(e.errs), graphQLErrorCodeKey.String(e.firstCode))
		if e.firstCode != "" && problem.Code(e.firstCode).Status() >= 500 {
			e.span.SetStatus(codes.Error, e.firstCode)
		}
	}
	e.span.End()
}

// maxSpanOperationNameBytes bounds the operation name a span carries:
// GraphQL names have no length limit, and a span outlives its request in
// the exporter's queue.
const maxSpanOperationNameBytes = 128

// spanOperationName returns name as a span carries it: a copy, cut at
// maxSpanOperationNameBytes (a GraphQL name is ASCII, so any cut is
// valid UTF-8). The parsed name is a substring of the document's text, and
// a span queued for export with the substring kept the whole text alive,
// up to the body limit per span.
func spanOperationName(name string) string {
	return strings.Clone(name[:min(len(name), maxSpanOperationNameBytes)])
}
