package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"

	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
	"bothy.example.com/bothy/internal/querycache"
	"bothy.example.com/bothy/internal/runs"
)

// SelectionLimit refuses a document with more than Max selections (fields,
// aliases, fragment spreads and inline fragments, counted as written, not
// expanded) before gqlgen validates it. Validation compares overlapping
// fields pairwise, so its cost grows with the square of the selections of a
// selection set; this pass is linear and bounds it (graphql.max_selections).
type SelectionLimit struct {
	Max        int
	TokenLimit int
	// Counts, when set, keeps the counts of recent documents by their
	// text, so that a document sent again (an agent's context query, every
	// REST route) is not parsed a second time per request on top of
	// gqlgen's cached parse (NewSelectionCounts).
	Counts *querycache.LRU[int]
}

// selectionCountOverhead is what one cached count costs beside its text:
// the map and list entries and the count.
const selectionCountOverhead = 96

// NewSelectionCounts returns the cache of selection counts for a parse
// cache of budget bytes (graphql.query_cache_bytes): a quarter of it,
// charged by the text of each document, so that the texts it keeps are
// bounded in bytes, not in number (a thousand documents near the body
// limit would keep almost a gigabyte); a document above a sixteenth of
// that is counted on every request. 0 caches none.
func NewSelectionCounts(budget int) *querycache.LRU[int] {
	return querycache.NewLRU(budget/4, func(query string, _ int) int { return len(query) + selectionCountOverhead })
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = SelectionLimit{}

// ExtensionName names the extension for gqlgen.
func (SelectionLimit) ExtensionName() string { return "SelectionLimit" }

// Validate accepts every schema.
func (SelectionLimit) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters counts the selections of the raw document.
// A document that does not parse is left to gqlgen, which reports it.
func (l SelectionLimit) MutateOperationParameters(ctx context.Context, raw *graphql.RawParams) *gqlerror.Error {
	n, ok := 0, false
	if l.Counts != nil {
		n, ok = l.Counts.Get(ctx, raw.Query)
	}
	if !ok {
		n = CountSelections(raw.Query, l.TokenLimit)
		if l.Counts != nil {
			l.Counts.Add(ctx, raw.Query, n)
		}
	}
	if n <= l.Max {
		return nil
	}
	return requestError(problem.Newf(problem.ValidationFailed, "selection_limit_exceeded",
		"the document has %d selections, more than the limit of %d (graphql.max_selections)", n, l.Max))
}

// requestError wraps p, a refusal of the request before it runs, so that
// gqlgen's transports answer it as a request error (no data; 400 or 422
// by media type) while the presenter still answers p's code and reason.
func requestError(p *problem.Error) *gqlerror.Error {
	err := gqlerror.WrapIfUnwrapped(p)
	if err.Extensions == nil {
		err.Extensions = map[string]any{}
	}
	err.Extensions["code"] = errcode.ValidationFailed
	return err
}

// CountSelections returns the number of selections written in the GraphQL
// document src, or 0 when it does not parse within tokenLimit tokens.
func CountSelections(src string, tokenLimit int) int {
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: src}, tokenLimit)
	if err != nil {
		return 0
	}
	n := 0
	var count func(set ast.SelectionSet)
	count = func(set ast.SelectionSet) {
		for _, sel := range set {
			n++
			switch s := sel.(type) {
			case *ast.Field:
				count(s.SelectionSet)
			case *ast.InlineFragment:
				count(s.SelectionSet)
			}
		}
	}
	for _, op := range doc.Operations {
		count(op.SelectionSet)
	}
	for _, f := range doc.Fragments {
		count(f.SelectionSet)
	}
	return n
}

// TextCheck refuses an operation whose string variables or string literals
// PostgreSQL cannot store (package text), with validation_failed and field
// code invalid_characters, before any resolver runs. The REST shim checks
// its inputs with the same function under REST pointers first.
type TextCheck struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = TextCheck{}

// ExtensionName names the extension for gqlgen.
func (TextCheck) ExtensionName() string { return "TextCheck" }

// Validate accepts every schema.
func (TextCheck) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext checks the variables, then the literals of the
// operation and of its fragments.
func (TextCheck) MutateOperationContext(_ context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	var fields []problem.FieldError
	for name, v := range oc.Variables {
		checkValue(v, "/variables/"+pointerEscape(name), &fields)
	}
	if oc.Operation != nil {
		checkLiterals(oc.Operation.SelectionSet, nil, &fields)
	}
	if oc.Doc != nil {
		for _, f := range oc.Doc.Fragments {
			checkLiterals(f.SelectionSet, []string{f.Name}, &fields)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return requestError(problem.Invalid(fields...))
}

func checkValue(v any, ptr string, out *[]problem.FieldError) {
	switch x := v.(type) {
	case string:
		if fe := text.Check(x, ptr); fe != nil {
			*out = append(*out, *fe)
		}
	case map[string]any:
		for k, e := range x {
			if !text.Storable(k) {
				*out = append(*out, *text.Check(k, ptr))
				continue
			}
			checkValue(e, ptr+"/"+pointerEscape(k), out)
		}
	case []any:
		for i, e := range x {
			checkValue(e, ptr+"/"+strconv.Itoa(i), out)
		}
	}
}

// checkLiterals checks the literals of the arguments in set, whose
// fields lie at path (names from the operation or fragment down). The
// pointer of a literal is only spelled out for a field with arguments:
// most fields have none, and a large selection would otherwise build a
// string per field on every request.
func checkLiterals(set ast.SelectionSet, path []string, out *[]problem.FieldError) {
	for _, sel := range set {
		switch s := sel.(type) {
		case *ast.Field:
			name := s.Alias
			if name == "" {
				name = s.Name
			}
			// Siblings reuse the slot after path: each is done with it
			// before the next one writes it.
			at := append(path, name)
			for _, a := range s.Arguments {
				checkLiteral(a.Value, "/"+strings.Join(at, "/")+"/"+a.Name, out)
			}
			checkLiterals(s.SelectionSet, at, out)
		case *ast.InlineFragment:
			checkLiterals(s.SelectionSet, path, out)
		}
	}
}

func checkLiteral(v *ast.Value, ptr string, out *[]problem.FieldError) {
	if v == nil {
		return
	}
	switch v.Kind {
	case ast.StringValue, ast.BlockValue:
		if fe := text.Check(v.Raw, ptr); fe != nil {
			*out = append(*out, *fe)
		}
	case ast.ListValue:
		for i, c := range v.Children {
			checkLiteral(c.Value, ptr+"/"+strconv.Itoa(i), out)
		}
	case ast.ObjectValue:
		for _, c := range v.Children {
			checkLiteral(c.Value, ptr+"/"+c.Name, out)
		}
	default:
		// Numbers, booleans, null, enums and variables carry no text.
	}
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// ListBounds size the complexity of list fields: a list field costs its
// child complexity times the number of items it can return.
type ListBounds struct {
	EventsDefault, EventsMax     int
	MessagesDefault, MessagesMax int
	// ContextItems bounds the elements of a run context list.
	ContextItems int
	// NestedItems is the cost factor of small lists without a limit
	// argument (mentions, attachments).
	NestedItems int
}

// Complexity returns complexity functions that make every list field cost
// what it can return: its limit argument (or the default when absent,
// clamped to the maximum) times the cost of one item.
func Complexity(b ListBounds) generated.ComplexityRoot {
	var c generated.ComplexityRoot
	items := func(limit *int, def, max int) int {
		n := def
		if limit != nil {
			n = *limit
		}
		if n > max {
			n = max
		}
		if n < 1 {
			n = 1
		}
		return n
	}
	// first and limit (deprecated) say the same; a request giving both is
	// refused by the resolver, so the larger is the bound that counts.
	either := func(limit, first *int) *int {
		if first == nil || limit != nil && *limit > *first {
			return limit
		}
		return first
	}
	c.Query.Events = func(child int, _ *string, limit, first *int) int {
		return 1 + child*items(either(limit, first), b.EventsDefault, b.EventsMax)
	}
	c.Thread.Messages = func(child int, _ *int, limit *int) int {
		return 1 + child*items(limit, b.MessagesDefault, b.MessagesMax)
	}
	c.Thread.History = func(child int, first *int, _ *string) int {
		return 1 + child*items(first, b.MessagesDefault, b.MessagesMax)
	}
	c.Query.AgentEvents = func(child int, _ *string, _, first *int) int {
		return 1 + child*items(first, runs.PollLimit, runs.PollLimit)
	}
	ctxList := func(child int) int { return 1 + child*b.ContextItems }
	c.RunContext.ThreadContext = ctxList
	c.RunContext.ChannelContext = ctxList
	nested := func(child int) int { return 1 + child*b.NestedItems }
	c.Message.Mentions = nested
	c.Message.Attachments = nested
	c.RunContextMessage.Attachments = nested
	return c
}

// capResponse answers a clear error instead of a GraphQL response larger
// than max bytes (graphql.max_response_bytes). It keeps at most max bytes
// of the answer: the rest is dropped as it is written, so an oversized
// answer never grows a second copy here.
func capResponse(max int, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &cappedWriter{w: w, header: w.Header(), max: max, status: http.StatusOK}
		next.ServeHTTP(cw, r)
		if cw.passed {
			return
		}
		if !cw.over {
			w.WriteHeader(cw.status)
			w.Write(cw.body)
			return
		}
		p := problem.Newf(problem.ValidationFailed, "response_too_large",
			"the response exceeds %d bytes (graphql.max_response_bytes): ask for fewer items or fields", max)
		ext := map[string]any{"code": string(p.Code), "status": p.Code.Status(), "reason": p.Reason}
		body, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{"message": p.Detail, "extensions": ext}}})
		w.Header().Del("Content-Length")
		w.Header().Set("Content-Type", "application/json")
		// 400 like other request errors: overHTTP turns it into 200 for
		// clients that accept only application/json, the shim reads the
		// code.
		w.WriteHeader(http.StatusBadRequest)
		w.Write(body)
	})
}

// cappedWriter keeps an answer until it is known to fit max bytes. An
// answer that declares its whole length up front (Content-Length, as the
// POST transport's answers with data do) and fits is written through
// (passed): no copy of a large answer is kept here.
type cappedWriter struct {
	w      http.ResponseWriter
	header http.Header
	max    int
	status int
	wrote  bool
	over   bool
	passed bool
	body   []byte
}

func (c *cappedWriter) Header() http.Header { return c.header }

func (c *cappedWriter) WriteHeader(code int) {
	if !c.wrote {
		c.status, c.wrote = code, true
	}
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.passed {
		return c.w.Write(p)
	}
	if !c.over && len(c.body) == 0 {
		// The length is declared by the POST transport, which knows it
		// (spliceWriter), and net/http refuses to write more than a
		// declared Content-Length: an answer declared to fit stays within
		// the cap.
		if n, err := strconv.Atoi(c.header.Get("Content-Length")); err == nil && n <= c.max {
			c.wrote, c.passed = true, true
			c.w.WriteHeader(c.status)
			return c.w.Write(p)
		}
	}
	c.wrote = true
	if c.over {
		return len(p), nil
	}
	if len(c.body)+len(p) > c.max {
		c.over, c.body = true, nil
		return len(p), nil
	}
	c.body = append(c.body, p...)
	return len(p), nil
}

// The cost factors of lists without a limit argument. A run context list
// holds at most the messages that fit its byte budget; 50 is the default
// history page, a fair bound of what one context lists. Mentions and
// attachments of one message are few; they count twice their item.
const (
	contextItems = 50
	nestedItems  = 2
)

// graphQLRefusals answers the HTTP-level refusals of /graphql as problems
// before authentication: 405 method_not_allowed with Allow for a method
// other than GET, POST and OPTIONS, and 415 unsupported_media_type for a
// POST whose body is not application/json. Neither reads the body.
func graphQLRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodOptions:
		case http.MethodPost:
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || (mt != "application/json" && mt != "multipart/form-data") {
				httpx.WriteProblem(w, r, problem.Newf(problem.UnsupportedMediaType, "content_type",
					"POST /graphql takes an application/json body (multipart/form-data for an upload)"))
				return
			}
		default:
			w.Header().Set("Allow", "GET, POST, OPTIONS")
			httpx.WriteProblem(w, r, problem.Newf(problem.MethodNotAllowed, "", "/graphql answers GET, POST and OPTIONS"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuseTrailing answers a POST body that holds more than one JSON value
// (trailing data after the request object) like any undecodable body:
// validation_failed invalid_json, in the GraphQL error shape. gqlgen's
// decoder stops after the first value and would run the request.
func refuseTrailing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A multipart upload is parsed by its own transport, which reads
		// the operations part as one JSON document.
		if r.Method != http.MethodPost || r.Body == nil || isMultipart(r) {
			next.ServeHTTP(w, r)
			return
		}
		data, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(data))
			var v json.RawMessage
			if dec.Decode(&v) == nil {
				if _, tail := dec.Token(); tail == io.EOF {
					r.Body = io.NopCloser(bytes.NewReader(data))
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		ext := map[string]any{"code": string(problem.ValidationFailed), "status": http.StatusBadRequest, "reason": "invalid_json"}
		body, _ := json.Marshal(map[string]any{"errors": []any{map[string]any{
			"message": "the body is not one JSON GraphQL request", "extensions": ext}}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write(body)
	})
}
