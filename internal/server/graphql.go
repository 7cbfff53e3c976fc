package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
)

// newGraphQL builds the one GraphQL executor of the process over es with the
// limits of cfg. The REST shim runs its stored operations on this same
// handler, so both faces share limits, presenter and recovery.
func newGraphQL(es graphql.ExecutableSchema, cfg *config.Config, log *slog.Logger) *handler.Server {
	srv := handler.New(es)
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(rawDataPOST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.SetParserTokenLimit(cfg.Int(config.GraphQLParserTokenLimit))
	if cfg.Bool(config.GraphQLIntrospection) {
		srv.Use(extension.Introspection{})
	}
	srv.Use(extension.FixedComplexityLimit(cfg.Int(config.GraphQLComplexityLimit)))
	srv.Use(DepthLimit{Max: cfg.Int(config.GraphQLDepthLimit)})
	srv.SetErrorPresenter(presenter(log))
	srv.SetRecoverFunc(func(ctx context.Context, err any) error {
		log.ErrorContext(ctx, "panic in resolver", "correlation_id", httpx.CorrelationID(ctx), "panic", fmt.Sprint(err))
		return problem.Internal(fmt.Errorf("panic: %v", err))
	})
	return srv
}

// GraphQL error codes of gqlgen and gqlparser that mean the request itself is
// invalid; they answer validation_failed with a reason naming the rule.
var requestErrorReasons = map[string]string{
	"GRAPHQL_PARSE_FAILED":      "parse_failed",
	"GRAPHQL_VALIDATION_FAILED": "graphql_validation_failed",
	"COMPLEXITY_LIMIT_EXCEEDED": "complexity_limit_exceeded",
	depthLimitCode:              "depth_limit_exceeded",
	"PERSISTED_QUERY_NOT_FOUND": "persisted_query_not_found",
}

// presenter maps every error to the shared vocabulary: extensions carry
// code, reason, status and fieldErrors like the REST problems. Internal
// errors show a fixed message; their cause goes to the log with the
// correlation id only.
func presenter(log *slog.Logger) graphql.ErrorPresenterFunc {
	return func(ctx context.Context, err error) *gqlerror.Error {
		gqlErr := graphql.DefaultErrorPresenter(ctx, err)
		var p *problem.Error
		if !errors.As(err, &p) {
			code, _ := gqlErr.Extensions["code"].(string)
			if gqlErr.Err == nil && (strings.HasPrefix(gqlErr.Message, "json request body could not be decoded") ||
				strings.HasPrefix(gqlErr.Message, "could not read request body")) {
				// gqlgen's message quotes the body; answer a fixed text instead.
				p = problem.Newf(problem.ValidationFailed, "invalid_json", "the body is not a JSON GraphQL request")
			} else if gqlErr.Message == "introspection disabled" {
				// gqlgen's own refusal when graphql.introspection is off.
				p = problem.Newf(problem.Forbidden, "introspection_disabled", "introspection is switched off (graphql.introspection)")
			} else if reason, ok := requestErrorReasons[code]; ok {
				p = problem.New(problem.ValidationFailed, reason)
				p.Detail = gqlErr.Message
			} else if gqlErr.Rule != "" || (gqlErr.Err == nil && len(gqlErr.Path) == 0) {
				p = problem.New(problem.ValidationFailed, "graphql_validation_failed")
				p.Detail = gqlErr.Message
			} else {
				p = problem.Internal(err)
			}
		}
		if p.Code == problem.InternalError && p.Cause() != nil {
			log.ErrorContext(ctx, "internal error", "correlation_id", httpx.CorrelationID(ctx), "error", p.Cause().Error())
		}
		if p.RetryAfter > 0 {
			httpx.HintsFrom(ctx).RetryAfter = p.RetryAfter
		}
		msg := p.Detail
		if msg == "" {
			msg = p.Code.Title()
		}
		ext := map[string]any{"code": string(p.Code), "status": p.Code.Status()}
		if p.Reason != "" {
			ext["reason"] = p.Reason
		}
		if len(p.Fields) > 0 {
			fe := make([]map[string]any, len(p.Fields))
			for i, f := range p.Fields {
				m := map[string]any{"pointer": f.Pointer, "code": f.Code}
				if f.Detail != "" {
					m["detail"] = f.Detail
				}
				fe[i] = m
			}
			ext["fieldErrors"] = fe
		}
		if p.RetryAfter > 0 {
			ext["retryAfterSeconds"] = httpx.RetrySeconds(p.RetryAfter)
		}
		return &gqlerror.Error{Message: msg, Path: gqlErr.Path, Locations: gqlErr.Locations, Extensions: ext}
	}
}

const depthLimitCode = "DEPTH_LIMIT_EXCEEDED"

// DepthLimit refuses operations whose selection is deeper than Max (config
// key graphql.depth_limit), counting fields through fragments.
type DepthLimit struct {
	Max int
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = DepthLimit{}

// ExtensionName names the extension for gqlgen.
func (DepthLimit) ExtensionName() string { return "DepthLimit" }

// Validate accepts every schema.
func (DepthLimit) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext refuses the operation when it is too deep.
func (d DepthLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	if oc.Operation == nil {
		return nil
	}
	if depth := selectionDepth(oc.Operation.SelectionSet, 0); depth > d.Max {
		err := gqlerror.Errorf("operation has depth %d, which exceeds the limit of %d", depth, d.Max)
		err.Extensions = map[string]any{"code": depthLimitCode}
		return err
	}
	return nil
}

// selectionDepth returns the deepest field nesting of set. seen guards
// against fragment cycles, which validation already refuses.
func selectionDepth(set ast.SelectionSet, level int) int {
	deepest := level
	for _, sel := range set {
		var d int
		switch s := sel.(type) {
		case *ast.Field:
			d = selectionDepth(s.SelectionSet, level+1)
		case *ast.InlineFragment:
			d = selectionDepth(s.SelectionSet, level)
		case *ast.FragmentSpread:
			if s.Definition != nil && level < 64 {
				d = selectionDepth(s.Definition.SelectionSet, level)
			}
		}
		if d > deepest {
			deepest = d
		}
	}
	return deepest
}

// overHTTP adapts gqlgen's status codes to the GraphQL-over-HTTP
// recommendations that the graphql-http audit checks: a request that
// accepts only application/json gets 200 for documents that fail to parse,
// validate or coerce (the errors are in the body), and an
// application/graphql-response+json error answer carries no data entry.
// Answers are small JSON documents, so buffering them costs little.
func overHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := &bufferedWriter{header: w.Header(), status: http.StatusOK}
		next.ServeHTTP(buf, r)
		body := buf.body.Bytes()
		ct := w.Header().Get("Content-Type")
		status := buf.status
		switch {
		case strings.HasPrefix(ct, "application/json") && (status == http.StatusUnprocessableEntity ||
			(status == http.StatusBadRequest && !bytes.Contains(body, []byte(`"reason":"invalid_json"`)))):
			status = http.StatusOK
		case strings.HasPrefix(ct, "application/graphql-response+json") && status >= 400:
			var doc map[string]json.RawMessage
			if json.Unmarshal(body, &doc) == nil {
				if _, has := doc["data"]; has {
					delete(doc, "data")
					body, _ = json.Marshal(doc)
				}
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
	})
}

type bufferedWriter struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (b *bufferedWriter) Header() http.Header { return b.header }
func (b *bufferedWriter) WriteHeader(code int) {
	if !b.wrote {
		b.status, b.wrote = code, true
	}
}
func (b *bufferedWriter) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}
