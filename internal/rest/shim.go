// Package rest owns the REST shim: a table of routes, each a stored GraphQL
// operation run on the one GraphQL executor, with its result rendered into
// the OpenAPI shape (snake_case members, lowercase enum values, no JSON
// null, problem+json errors). No route has business logic of its own.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/platform/answerbuf"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// In says where a route parameter comes from.
type In string

// Parameter sources.
const (
	InPath   In = "path"
	InQuery  In = "query"
	InHeader In = "header"
)

// Param maps one path, query or header parameter onto a GraphQL variable.
type Param struct {
	Name string // name in the path pattern or query string
	In   In
	Var  string // GraphQL variable name
	Int  bool   // the variable is an Int
	// Enum lists the values of a variable of a GraphQL enum type as REST
	// spells them, in lower case (allow); GraphQL takes them in upper case
	// (ALLOW). Any other value is refused (invalid).
	Enum []string
}

// Route is one REST operation of the OpenAPI document.
type Route struct {
	OperationID string
	// Action is the authorization action the route's operation decides
	// (its rate-limit class follows from authz.Table). The access log names
	// it for each request of the route (httpx.NoteAction), and
	// TestRouteActions checks it against the door's audit.
	Action   authz.Action
	Method   string
	Path     string // Go ServeMux pattern path, e.g. /api/v1/runs/{run_id}
	Document string // the stored GraphQL operation (named OperationID)
	Params   []Param
	// BodyVar names the variable that receives the JSON body, converted by
	// the GraphQL input type of that variable; empty for no body.
	BodyVar string
	// Result is the root field of the operation whose value is the body.
	Result string
	// Unwrap, when set, renders this member of the result instead of the
	// whole result (for results that carry a replay flag).
	Unwrap string
	// ReplayFlag names a Boolean member of the result that marks an
	// idempotent replay: 200 with Idempotent-Replay instead of Created.
	ReplayFlag string
	// Created answers 201 instead of 200.
	Created bool
	// Omit names result members (GraphQL field names) left out of the body.
	Omit []string
	// BodyFields maps members of a flat JSON body onto scalar variables
	// (REST member name to GraphQL variable name), for bodies that are not
	// one input object.
	BodyFields map[string]string
	// OptionalBody lets a route with BodyFields be called without a body
	// (read as an empty object), for bodies whose members are all optional.
	OptionalBody bool
	// Upload names the variable (of type Upload) that receives the one
	// part UploadPart of a multipart/form-data body, streamed to the
	// resolver as it arrives; the route takes no other body. BodyLimit is
	// then the body limit of the route instead of http.max_body_bytes
	// (the server applies it).
	Upload string
}

// UploadPart is the name of the one multipart part an upload route reads.
const UploadPart = "file"

// Shim serves the routes of its table.
type Shim struct {
	schema *ast.Schema
	types  map[string]*typeInfo
	gql    http.Handler
	// maxResponse is graphql.max_response_bytes: a larger answer is refused
	// (response_too_large), as the GraphQL face refuses it.
	maxResponse int
	routes      []*compiled
}

type compiled struct {
	Route
	op      *ast.OperationDefinition
	resType *ast.Type
	bodyDef *ast.Definition
}

// New compiles routes against schema and returns a shim that runs them on
// gql (the GraphQL HTTP handler, with Transport installed first), refusing
// answers whose data is over maxResponse bytes (graphql.max_response_bytes;
// 0: no limit). A stored operation that does not validate is a programming
// error and fails New.
func New(schema *ast.Schema, gql http.Handler, routes []Route, maxResponse int) (*Shim, error) {
	s := &Shim{schema: schema, types: typeTable(schema), gql: gql, maxResponse: maxResponse}
	for _, rt := range routes {
		doc, errs := gqlparser.LoadQueryWithRules(schema, rt.Document, nil)
		if errs != nil {
			return nil, fmt.Errorf("route %s: %w", rt.OperationID, errs)
		}
		op := doc.Operations.ForName(rt.OperationID)
		if op == nil {
			return nil, fmt.Errorf("route %s: the document has no operation of that name", rt.OperationID)
		}
		c := &compiled{Route: rt, op: op}
		root := schema.Query
		if op.Operation == ast.Mutation {
			root = schema.Mutation
		}
		f := root.Fields.ForName(rt.Result)
		if f == nil {
			return nil, fmt.Errorf("route %s: unknown root field %s", rt.OperationID, rt.Result)
		}
		c.resType = f.Type
		if rt.BodyVar != "" {
			v := op.VariableDefinitions.ForName(rt.BodyVar)
			if v == nil {
				return nil, fmt.Errorf("route %s: no variable %s", rt.OperationID, rt.BodyVar)
			}
			c.bodyDef = schema.Types[v.Type.Name()]
		}
		s.routes = append(s.routes, c)
	}
	return s, nil
}

// Routes returns the compiled route table (for metadata tests and docs).
func (s *Shim) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, c := range s.routes {
		out[i] = c.Route
	}
	return out
}

// Register adds every route to mux, each under its method. A request that
// no route takes is left to mux's catch-all: a subtree pattern of the shim's
// own (as /api/v1/ was) would take every method of a known path and hide
// that the path exists, which a 405 with Allow must tell.
func (s *Shim) Register(mux *http.ServeMux, wrap func(http.Handler) http.Handler) {
	for _, c := range s.routes {
		c := c
		mux.Handle(c.Method+" "+c.Path, wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, c)
		})))
	}
}

type gqlResponse struct {
	Data   map[string]json.RawMessage `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

func (s *Shim) serve(w http.ResponseWriter, r *http.Request, c *compiled) {
	httpx.NoteOperation(r.Context(), c.OperationID)
	httpx.NoteAction(r.Context(), string(c.Action))
	vars, err := s.variables(r, c)
	if err != nil {
		httpx.WriteProblem(w, r, err)
		return
	}
	bufs := getBuffers()
	defer putBuffers(bufs)
	out, status, err := s.execute(w, r, c, vars, bufs)
	if err != nil {
		httpx.WriteProblem(w, r, err)
		return
	}
	bufs.out = out
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(out)
}

// execute runs route c's stored operation with vars on the GraphQL
// handler, in process: the call rides in the request's context to the
// handler's Transport, which hands the executor's answer back as it is (no
// variables encoded, no request body parsed, no answer envelope written
// and read again), and renders it into bufs.out. Whatever the handler
// answers itself instead (a recovered panic) is read from what it wrote.
func (s *Shim) execute(w http.ResponseWriter, r *http.Request, c *compiled, vars map[string]any, bufs *buffers) ([]byte, int, error) {
	call := &call{params: graphql.RawParams{Query: c.Document, OperationName: c.OperationID, Variables: vars}}
	rec := &recorder{header: http.Header{}, body: &bufs.answer}
	s.gql.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), callKey{}, call)))
	if call.resp == nil {
		return s.restBody(w, rec.body.Bytes(), c, bufs.out[:0])
	}
	return s.restAnswer(w, call.resp, c, bufs.out[:0])
}

// buffers are the two buffers a REST call needs: the GraphQL answer and
// its REST rendering. Both are dead once the body is written (every writer
// on the way copies or writes through, none keeps the slice), so they go
// back to a pool: a large answer (a run context is about 160 kB) then
// costs no new allocation, and no garbage, per call. Buffers above
// answerbuf.MaxPooled are left to the collector, as answerbuf does.
type buffers struct {
	answer bytes.Buffer
	out    []byte
}

var bufferPool = sync.Pool{New: func() any { return new(buffers) }}

func getBuffers() *buffers { return bufferPool.Get().(*buffers) }

func putBuffers(b *buffers) {
	if b.answer.Cap() > answerbuf.MaxPooled || cap(b.out) > answerbuf.MaxPooled {
		return
	}
	b.answer.Reset()
	b.out = b.out[:0]
	bufferPool.Put(b)
}

// restBody renders the GraphQL answer envelope gql of route c (as the
// handler wrote it) as the REST body, appended to out, and returns it with
// its status; an answer with errors becomes the problem of its first error.
func (s *Shim) restBody(w http.ResponseWriter, gql []byte, c *compiled, out []byte) ([]byte, int, error) {
	undecodable := problem.Internal("rest.body", fmt.Errorf("route %s: undecodable GraphQL response", c.OperationID))
	top := scanner{in: gql}
	if err := top.expect('{'); err != nil {
		return nil, 0, undecodable
	}
	if first, err := top.key(); err != nil {
		return nil, 0, undecodable
	} else if string(first) == "errors" {
		// Error answers are small: decode them whole.
		var resp gqlResponse
		dec := json.NewDecoder(bytes.NewReader(gql))
		dec.UseNumber()
		if err := dec.Decode(&resp); err != nil || len(resp.Errors) == 0 {
			return nil, 0, undecodable
		}
		return nil, 0, c.problemOf(resp.Errors[0].Message, resp.Errors[0].Extensions)
	}
	data, err := scanner{in: gql}.member("data")
	if err != nil || data == nil {
		return nil, 0, undecodable
	}
	return s.renderData(w, *data, c, out, len(gql))
}

// restAnswer renders the executor's answer resp of route c as the REST
// body, appended to out, like restBody; the data's array goes back to
// answerbuf once rendered (the answer was the executor's alone and is
// referenced nowhere else).
func (s *Shim) restAnswer(w http.ResponseWriter, resp *graphql.Response, c *compiled, out []byte) ([]byte, int, error) {
	if len(resp.Errors) > 0 {
		return nil, 0, c.problemOf(resp.Errors[0].Message, wireExtensions(resp.Errors[0].Extensions))
	}
	if s.maxResponse > 0 && len(resp.Data) > s.maxResponse {
		return nil, 0, problem.Newf(problem.ValidationFailed, "response_too_large",
			"the response exceeds %d bytes (graphql.max_response_bytes): ask for fewer items or fields", s.maxResponse)
	}
	if len(resp.Data) == 0 {
		return nil, 0, problem.Internal("rest.body", fmt.Errorf("route %s: no data", c.OperationID))
	}
	body, status, err := s.renderData(w, scanner{in: resp.Data}, c, out, len(resp.Data))
	answerbuf.Release(resp.Data)
	return body, status, err
}

// wireExtensions returns a GraphQL error's extensions as a client decodes
// them (JSON numbers as json.Number, lists as []any, objects as maps):
// problemOf reads one shape whichever way the answer came. Error answers
// are small and rare.
func wireExtensions(ext map[string]any) map[string]any {
	raw, err := json.Marshal(ext)
	if err != nil {
		return nil
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&out) != nil {
		return nil
	}
	return out
}

// renderData renders data, the data member of route c's answer (size
// bytes long), as the REST body appended to out, with its status.
func (s *Shim) renderData(w http.ResponseWriter, data scanner, c *compiled, out []byte, size int) ([]byte, int, error) {
	undecodable := problem.Internal("rest.body: undecodable response", fmt.Errorf("route %s: undecodable GraphQL response", c.OperationID))
	value, err := data.member(c.Result)
	if err != nil || data.isNull() {
		return nil, 0, problem.Internal("rest.body: read data member", fmt.Errorf("route %s: no data", c.OperationID))
	}
	if value == nil {
		return nil, 0, problem.Internal("rest.body: data member missing", fmt.Errorf("route %s: no data", c.OperationID))
	}
	if probe := *value; probe.isNull() {
		return nil, 0, problem.New(problem.NotFound, "")
	}
	typ := c.resType
	status := http.StatusOK
	if c.Created {
		status = http.StatusCreated
	}
	if replayed(value, c.ReplayFlag) {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replay", "true")
	}
	if c.Unwrap != "" {
		inner, innerType, err := s.unwrap(value, typ, c)
		if err != nil {
			return nil, 0, err
		}
		if inner == nil {
			return []byte("null"), status, nil
		}
		value, typ = inner, innerType
	}
	if cap(out) < size {
		out = make([]byte, 0, size)
	}
	out, err = s.renderJSON(out, value, typ, c.Omit)
	if err != nil {
		return nil, 0, undecodable
	}
	return out, status, nil
}

// replayed reports whether the result value says, in its member flag (a
// route's ReplayFlag; none when empty), that the mutation was a replay of
// an earlier one.
func replayed(value *scanner, flag string) bool {
	if flag == "" {
		return false
	}
	f, err := value.member(flag)
	if err != nil || f == nil {
		return false
	}
	raw, err := f.skip()
	return err == nil && string(raw) == "true"
}

// unwrap returns the member c.Unwrap of value, of type typ, and the
// member's type: the body of route c is that member alone. inner is nil
// when the member is missing from value.
func (s *Shim) unwrap(value *scanner, typ *ast.Type, c *compiled) (inner *scanner, innerType *ast.Type, err error) {
	def := s.schema.Types[typ.Name()]
	f := def.Fields.ForName(c.Unwrap)
	inner, err = value.member(c.Unwrap)
	if f == nil || err != nil {
		return nil, nil, problem.Internal("rest.body", fmt.Errorf("route %s: cannot unwrap %s", c.OperationID, c.Unwrap))
	}
	return inner, f.Type, nil
}

// problemOf rebuilds a problem from a GraphQL error's extensions, with
// each field error's pointer in the REST form of route c (restPointer).
func (c *compiled) problemOf(msg string, ext map[string]any) *problem.Error {
	code, _ := ext["code"].(string)
	if !problem.Code(code).Known() {
		return problem.Internal("rest.problemOf", errors.New("GraphQL error without a known code"))
	}
	p := problem.New(problem.Code(code), "")
	p.Reason, _ = ext["reason"].(string)
	fes, _ := ext["fieldErrors"].([]any)
	// A message of the title and the field list was made by the GraphQL
	// presenter from the field errors; REST lists them in errors[] instead.
	if msg != p.Code.Title() && !(len(fes) > 0 && strings.HasPrefix(msg, p.Code.Title()+": ")) {
		p.Detail = msg
	}
	for _, fe := range fes {
		m, _ := fe.(map[string]any)
		f := problem.FieldError{}
		f.Pointer, _ = m["pointer"].(string)
		f.Pointer = c.restPointer(f.Pointer)
		f.Code, _ = m["code"].(string)
		f.Detail, _ = m["detail"].(string)
		p.Fields = append(p.Fields, f)
	}
	p.OldestCursor, _ = ext["oldestCursor"].(string)
	if v, ok := ext["currentVersion"].(json.Number); ok {
		if n, err := v.Int64(); err == nil {
			cur := int(n)
			p.CurrentVersion = &cur
		}
	}
	// The answer is decoded with UseNumber.
	if ra, ok := ext["retryAfterSeconds"].(json.Number); ok {
		if n, err := ra.Int64(); err == nil && n > 0 {
			p.RetryAfter = time.Duration(n) * time.Second
		}
	}
	return p
}

// ParamPointer is the pointer of a field error that names a parameter
// rather than a body member: its place and name, "query:limit",
// "path:thread_id" or "header:Bothy-Run-Holder" (docs/clients.md#problems).
// A JSON pointer always starts with "/" or is empty, so the two forms
// never meet.
func ParamPointer(p Param) string { return string(p.In) + ":" + p.Name }

// restPointer turns a pointer of the modules' vocabulary (a JSON pointer
// into the body, or the bare name of an argument: "limit", "holder") into
// the REST form of route c: a bare name becomes the JSON pointer of the
// body member of that name, or ParamPointer of the parameter whose name or
// variable it is. A pointer the route does not know stays as it is.
func (c *compiled) restPointer(ptr string) string {
	if ptr == "" || strings.HasPrefix(ptr, "/") || strings.Contains(ptr, ":") {
		return ptr
	}
	if _, ok := c.BodyFields[ptr]; ok {
		return "/" + ptr
	}
	for _, p := range c.Params {
		if p.Name == ptr || p.Var == ptr {
			return ParamPointer(p)
		}
	}
	return ptr
}

// variables builds the operation's variables from path, query and body;
// every invalid parameter and member is listed in one validation error.
func (s *Shim) variables(r *http.Request, c *compiled) (map[string]any, error) {
	vars := map[string]any{}
	fields := paramVars(r, c, vars)
	if c.Upload != "" {
		up, err := uploadVar(r)
		if err != nil {
			return nil, err
		}
		vars[c.Upload] = up
	}
	if c.BodyVar != "" || c.BodyFields != nil {
		bad, err := s.bodyVars(r, c, vars)
		if err != nil {
			return nil, err
		}
		fields = append(fields, bad...)
	}
	if len(fields) > 0 {
		return nil, problem.Invalid(fields...)
	}
	return vars, nil
}

// paramVars sets the variables of route c's path, query and header
// parameters present in r, and returns the field errors of those that are
// malformed.
func paramVars(r *http.Request, c *compiled, vars map[string]any) []problem.FieldError {
	var fields []problem.FieldError
	for _, p := range c.Params {
		raw, present := paramOf(r, p)
		if !present {
			continue
		}
		if p.Int {
			n, err := strconv.ParseInt(raw, 10, 32)
			if err != nil {
				fields = append(fields, problem.FieldError{Pointer: ParamPointer(p), Code: "invalid_type", Detail: "must be a 32-bit integer"})
				continue
			}
			// As a JSON body would carry it: the handler's checks and
			// unmarshalers see what they see from a client.
			vars[p.Var] = json.Number(strconv.FormatInt(n, 10))
			continue
		}
		if fe := text.Check(raw, ParamPointer(p)); fe != nil {
			fields = append(fields, *fe)
			continue
		}
		if p.Enum == nil {
			vars[p.Var] = raw
		} else if slices.Contains(p.Enum, raw) {
			vars[p.Var] = strings.ToUpper(raw)
		} else {
			fields = append(fields, problem.FieldError{Pointer: ParamPointer(p), Code: "invalid", Detail: "one of " + strings.Join(p.Enum, ", ")})
		}
	}
	return fields
}

// paramOf returns parameter p of r and whether r has it (a path
// parameter always).
func paramOf(r *http.Request, p Param) (string, bool) {
	switch p.In {
	case InPath:
		return r.PathValue(p.Name), true
	case InHeader:
		_, present := r.Header[http.CanonicalHeaderKey(p.Name)]
		return r.Header.Get(p.Name), present
	default:
		return r.URL.Query().Get(p.Name), r.URL.Query().Has(p.Name)
	}
}

// uploadVar reads the head of a multipart/form-data body up to its part
// UploadPart and returns that part as an Upload whose reader streams the
// rest: the file is never buffered here. Any other part before it, a body
// of another type, or no such part is refused.
func uploadVar(r *http.Request) (graphql.Upload, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return graphql.Upload{}, problem.Newf(problem.UnsupportedMediaType, "content_type", "the body must be multipart/form-data with one part %q", UploadPart)
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return graphql.Upload{}, problem.Invalid(problem.FieldError{Pointer: "", Code: "invalid_multipart", Detail: "the body is not a multipart/form-data document"})
	}
	part, err := mr.NextPart()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return graphql.Upload{}, problem.Newf(problem.PayloadTooLarge, "file_too_large", "the file is larger than files.max_bytes")
	case errors.Is(err, io.EOF):
		return graphql.Upload{}, problem.Invalid(problem.FieldError{Pointer: "/" + UploadPart, Code: "required"})
	case err != nil:
		return graphql.Upload{}, problem.Invalid(problem.FieldError{Pointer: "", Code: "invalid_multipart", Detail: "the body is not a multipart/form-data document"})
	case part.FormName() != UploadPart:
		return graphql.Upload{}, problem.Invalid(problem.FieldError{Pointer: "/" + escapePointer(part.FormName()), Code: "unknown_member",
			Detail: "the body has one part, " + UploadPart})
	}
	return graphql.Upload{File: streamed{part}, Filename: part.FileName(), ContentType: part.Header.Get("Content-Type")}, nil
}

// streamed is a part read once, front to back, as an Upload's
// io.ReadSeeker: it cannot seek, which no reader of an upload needs (the
// files module streams it to the store).
type streamed struct{ io.Reader }

// Seek answers only the current position's query (offset 0 from the
// current position) and refuses every move.
func (streamed) Seek(offset int64, whence int) (int64, error) {
	return 0, errors.New("rest: an upload is streamed and cannot seek")
}

// bodyVars reads route c's JSON body into vars: the whole body as c.BodyVar,
// or its members as the variables c.BodyFields names. It returns the field
// errors of invalid members, or an error for a body that is no JSON
// document of the declared media type.
func (s *Shim) bodyVars(r *http.Request, c *compiled, vars map[string]any) ([]problem.FieldError, error) {
	// The document declares application/json bodies; another declared
	// type is refused rather than guessed at.
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return nil, problem.Newf(problem.UnsupportedMediaType, "content_type", "the body must be application/json")
		}
	}
	var body any
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	if err := dec.Decode(&body); errors.Is(err, io.EOF) && c.OptionalBody {
		body = map[string]any{}
	} else if err != nil {
		return nil, problem.Invalid(problem.FieldError{Pointer: "", Code: "invalid_json", Detail: "the body is not a JSON document"})
	}
	if dec.More() {
		return nil, problem.Invalid(problem.FieldError{Pointer: "", Code: "invalid_json", Detail: "the body holds more than one JSON document"})
	}
	if c.BodyVar != "" {
		v, errs := s.input(body, &ast.Type{NamedType: c.bodyDef.Name, NonNull: true}, "")
		vars[c.BodyVar] = v
		return errs, nil
	}
	obj, ok := body.(map[string]any)
	if !ok {
		return nil, problem.Invalid(problem.FieldError{Pointer: "", Code: "invalid_type", Detail: "must be an object"})
	}
	var fields []problem.FieldError
	for k, val := range obj {
		name, ok := c.BodyFields[k]
		if !ok {
			fields = append(fields, problem.FieldError{Pointer: "/" + escapePointer(k), Code: "unknown_member"})
			continue
		}
		v, errs := s.input(val, c.op.VariableDefinitions.ForName(name).Type, "/"+k)
		fields = append(fields, errs...)
		vars[name] = v
	}
	for k, name := range c.BodyFields {
		if _, ok := obj[k]; !ok && c.op.VariableDefinitions.ForName(name).Type.NonNull {
			fields = append(fields, problem.FieldError{Pointer: "/" + k, Code: "required"})
		}
	}
	return fields, nil
}
