// Package apitest is the integration test client of Bothy: it starts the
// real server on 127.0.0.1 and port 0 over a fresh cloned test database with
// the example world, and talks to it through both faces. Every REST response
// is validated against docs/api/openapi.yaml with kin-openapi and checked for
// JSON null; every GraphQL response is decoded strictly into typed structs.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/jackc/pgx/v5"

	apidoc "bothy.example.com/bothy/docs/api"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/server"
)

// Options adjust a test server: they are the module harness's options
// (configuration, logger, tracer, database, hooks).
type Options = moduletest.Options

// Env is a running test server with its database and world. The assembled
// modules, pool, clock and world are those of the embedded module harness.
type Env struct {
	*moduletest.Env
	// Server is the HTTP server over the harness's modules.
	Server *server.Server
	t      testing.TB
	URL    string
	router routers.Router
	doc    *openapi3.T
	client *http.Client
	stop   func()
}

// Stop drains and stops the server as a SIGTERM does (server.drain_delay,
// then the listener closes and requests in flight finish) and returns once
// it stopped. The test's cleanup does the same when Stop was not called.
func (e *Env) Stop() { e.stop() }

// Start runs a server for t and stops it when t ends: the modules as the
// module harness assembles them, served on 127.0.0.1 and port 0.
//
// Unless opts.Config names server.drain_delay, the server stops without the
// drain delay (default 2 s) when the test ends: a test that does not test
// draining would otherwise wait it out in its cleanup. Unless it names
// them, database.query_timeout and database.acquire_timeout are a minute
// and half a minute: make test runs dozens of servers on two cores, where
// a request may wait seconds for the CPU, and only the tests of the bounds
// (TestFrozenDatabaseAnswers) are about them.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	opts.Config = withoutDrainDelay(opts.Config)
	for k, v := range map[string]string{config.DatabaseQueryTimeout: "60s", config.DatabaseAcquireTimeout: "30s"} {
		if _, set := opts.Config[k]; !set {
			opts.Config[k] = v
		}
	}
	m := moduletest.Build(t, opts)
	srv, err := server.New(server.Deps{Config: m.Config, Pool: m.Pool, DatabaseURL: m.PoolURL, Clock: m.Clock, Logger: m.Log, Modules: m.Modules})
	if err != nil {
		t.Fatalf("assemble server: %v", err)
	}
	env := &Env{Env: m, Server: srv, t: t, client: &http.Client{Timeout: 60 * time.Second}}
	env.serve(env.Server)
	return env
}

// withoutDrainDelay returns cfg (copied, never changed) with
// server.drain_delay 0s unless cfg sets it.
func withoutDrainDelay(cfg map[string]string) map[string]string {
	if _, set := cfg[config.ServerDrainDelay]; set {
		return cfg
	}
	out := maps.Clone(cfg)
	if out == nil {
		out = map[string]string{}
	}
	out[config.ServerDrainDelay] = "0s"
	return out
}

// Peer starts a second server process-equivalent (its own pool, listener
// and long-poll hub) on the same database and world, for tests of
// behaviour across replicas.
func (e *Env) Peer() *Env {
	e.t.Helper()
	pool, err := db.Open(context.Background(), db.Options{URL: e.DBURL, MaxConns: e.Config.Int(config.DatabaseMaxConns)})
	if err != nil {
		e.t.Fatalf("open peer pool: %v", err)
	}
	e.t.Cleanup(pool.Close)
	srv, err := server.New(server.Deps{Config: e.Config, Pool: pool, DatabaseURL: e.DBURL, Clock: e.Clock, Logger: e.Log})
	if err != nil {
		e.t.Fatalf("assemble peer: %v", err)
	}
	m := *e.Env
	m.Pool, m.PoolURL, m.Modules = pool, e.DBURL, srv.Modules()
	m.Identity, m.Authz, m.Chat, m.Messaging, m.Feed = srv.Identity, srv.Authz, srv.Chat, srv.Messaging, srv.Feed
	m.Events, m.Runs, m.Admin, m.DB = srv.Events, srv.Runs, srv.Admin, srv.DB
	peer := &Env{Env: &m, Server: srv, t: e.t, client: &http.Client{Timeout: 60 * time.Second}}
	peer.serve(srv)
	return peer
}

// serve runs srv on 127.0.0.1:0 until the test ends.
func (e *Env) serve(srv *server.Server) {
	t := e.t
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(sctx, ln) }()
	var once sync.Once
	// The clients' idle connections close before the server stops:
	// net/http's Shutdown waits five seconds for a connection that never
	// carried a request (one the client's transport dialled for a request
	// another connection then took), since a request might still come.
	e.stop = func() { once.Do(func() { e.client.CloseIdleConnections(); cancel(); wg.Wait() }) }
	t.Cleanup(e.stop)

	e.URL = "http://" + ln.Addr().String()
	e.doc, e.router = openAPI(t, e.URL)
}

var decoderOnce sync.Once

// openAPI loads and validates the OpenAPI document, with base as its server.
func openAPI(t testing.TB, base string) (*openapi3.T, routers.Router) {
	t.Helper()
	decoderOnce.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/problem+json", openapi3filter.JSONBodyDecoder)
	})
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(apidoc.OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml is not valid: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	return doc, router
}

// Response is a REST answer, already validated against the OpenAPI document.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v, failing the test on error.
func (r *Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// Problem decodes the body as a problem.
func (r *Response) Problem(t testing.TB) Problem {
	t.Helper()
	var p Problem
	r.JSON(t, &p)
	return p
}

// Problem is the problem+json body.
type Problem struct {
	Type         string       `json:"type"`
	Title        string       `json:"title"`
	Status       int          `json:"status"`
	Code         string       `json:"code"`
	Reason       string       `json:"reason"`
	Detail       string       `json:"detail"`
	Errors       []FieldError `json:"errors"`
	OldestCursor string       `json:"oldest_cursor"`
	// CurrentVersion is a live_version conflict's current version.
	CurrentVersion *int   `json:"current_version"`
	CorrelationID  string `json:"correlation_id"`
	Instance       string `json:"instance"`
}

// FieldError is one entry of Problem.Errors.
type FieldError struct {
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Detail  string `json:"detail"`
}

// REST sends a request to path with the bearer token (empty: none) and an
// optional body (a string is sent as is, anything else as JSON). It fails
// the test when the answer does not validate against the OpenAPI document,
// contains a JSON null, or lacks a Correlation-Id.
func (e *Env) REST(method, path, token string, body any) *Response {
	e.t.Helper()
	return e.RESTWith(method, path, token, body, nil)
}

// RESTWith is REST with extra request headers.
func (e *Env) RESTWith(method, path, token string, body any, header http.Header) *Response {
	e.t.Helper()
	r, err := e.restDo(method, path, token, body, header)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// Do is REST for a goroutine other than the test's: a request that cannot
// be made or answered is returned as an error instead of ending the test
// (t.Fatal from another goroutine would leave the test waiting for it). The
// answer is checked as REST checks it; its failures are reported with
// t.Errorf, which any goroutine may call.
func (e *Env) Do(method, path, token string, body any) (*Response, error) {
	return e.restDo(method, path, token, body, nil)
}

// PostDo is Post for a goroutine other than the test's (see Do).
func (e *Env) PostDo(who, thread, clientMsgID, content string) (*Response, error) {
	return e.Do(http.MethodPost, "/api/v1/threads/"+thread+"/messages", e.World.Token(who),
		map[string]any{"client_msg_id": clientMsgID, "content_md": content})
}

// restDo makes a REST request and checks its answer: a Correlation-Id
// header, the OpenAPI document (validate), and a JSON body without nulls.
// Failed checks are reported with t.Errorf; only a request that cannot be
// made or answered is returned as an error.
func (e *Env) restDo(method, path, token string, body any, header http.Header) (*Response, error) {
	raw, err := encodeBody(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, e.URL+path, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if raw != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := &Response{Status: resp.StatusCode, Header: resp.Header, Body: data}
	if resp.Header.Get("Correlation-Id") == "" {
		e.t.Errorf("%s %s: no Correlation-Id header", method, path)
	}
	e.validate(req, raw, out)
	e.checkNoNulls(method, path, out)
	return out, nil
}

// encodeBody returns the bytes of a request body: none for nil, a string or
// []byte as it is (so that tests can send malformed JSON), anything else
// encoded as JSON.
func encodeBody(body any) ([]byte, error) {
	switch b := body.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(b), nil
	case []byte:
		return b, nil
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encode body: %w", err)
		}
		return raw, nil
	}
}

// checkNoNulls reports a JSON answer that does not parse or holds a null
// (the API omits absent values instead).
func (e *Env) checkNoNulls(method, path string, resp *Response) {
	if len(resp.Body) == 0 || !strings.Contains(resp.Header.Get("Content-Type"), "json") {
		return
	}
	var v any
	if err := json.Unmarshal(resp.Body, &v); err != nil {
		e.t.Errorf("%s %s: body is not JSON: %v", method, path, err)
	} else if p := NullPath(v, ""); p != "" {
		e.t.Errorf("%s %s: JSON null at %s in %s", method, path, p, resp.Body)
	}
}

// validate checks a REST answer against the OpenAPI document: the operation
// of the route when the path is one, otherwise the Problem schema.
func (e *Env) validate(req *http.Request, reqBody []byte, resp *Response) {
	e.t.Helper()
	vreq, _ := http.NewRequest(req.Method, req.URL.String(), bytes.NewReader(reqBody))
	vreq.Header = req.Header.Clone()
	route, params, err := e.router.FindRoute(vreq)
	if err != nil {
		if !strings.HasPrefix(req.URL.Path, "/api/v1/") {
			return
		}
		// An unknown route under the API answers a problem.
		schema := e.doc.Components.Schemas["Problem"].Value
		var v any
		if err := json.Unmarshal(resp.Body, &v); err != nil {
			e.t.Errorf("%s %s: problem body is not JSON", req.Method, req.URL.Path)
			return
		}
		if err := schema.VisitJSON(v); err != nil {
			e.t.Errorf("%s %s: body does not validate as Problem: %v", req.Method, req.URL.Path, err)
		}
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.Status, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(resp.Body)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		e.t.Errorf("%s %s: response %d does not validate against openapi.yaml: %v\nbody: %s", req.Method, req.URL.Path, resp.Status, err, resp.Body)
	}
}

// NullPath returns the JSON pointer of the first null in v, or "".
func NullPath(v any, at string) string {
	switch x := v.(type) {
	case nil:
		if at == "" {
			return "/"
		}
		return at
	case map[string]any:
		for k, val := range x {
			if p := NullPath(val, at+"/"+k); p != "" {
				return p
			}
		}
	case []any:
		for i, val := range x {
			if p := NullPath(val, fmt.Sprintf("%s/%d", at, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

// GQLError is one error of a GraphQL response.
type GQLError struct {
	Message    string    `json:"message"`
	Path       []any     `json:"path"`
	Locations  []any     `json:"locations"`
	Extensions GQLErrExt `json:"extensions"`
}

// GQLFieldError is one invalid member of a GraphQL request: Field is the
// argument path in the request (input.runId), Pointer the same member in
// the REST body.
type GQLFieldError struct {
	Field   string `json:"field"`
	Pointer string `json:"pointer"`
	Code    string `json:"code"`
	Detail  string `json:"detail"`
}

// GQLErrExt are the extensions Bothy puts on every GraphQL error.
type GQLErrExt struct {
	Code              string          `json:"code"`
	Reason            string          `json:"reason"`
	Status            int             `json:"status"`
	FieldErrors       []GQLFieldError `json:"fieldErrors"`
	RetryAfterSeconds int             `json:"retryAfterSeconds"`
	OldestCursor      string          `json:"oldestCursor"`
	CurrentVersion    *int            `json:"currentVersion"`
}

// GQLResult is a raw GraphQL answer.
type GQLResult struct {
	Status int
	Header http.Header
	Errors []GQLError
	Data   json.RawMessage
	// Extensions are the answer's extensions; nil when it has none.
	Extensions *GQLExtensions
}

// GQLExtensions are the members Bothy puts in the extensions of a GraphQL
// answer over HTTP. Decoding is strict: a member the server adds without
// this type knowing it fails the test.
type GQLExtensions struct {
	// Cost is the operation's complexity against graphql.complexity_limit;
	// nil when the request was refused before its cost was counted.
	Cost *GQLCost `json:"cost"`
}

// GQLCost is extensions.cost.
type GQLCost struct {
	Requested int `json:"requested"`
	Limit     int `json:"limit"`
}

// GraphQL posts query with vars as token and decodes data strictly into out
// (unknown members fail the test, so the typed struct is the check of the
// schema's shape). out may be nil. It returns the errors and raw answer.
func (e *Env) GraphQL(token, query string, vars map[string]any, out any) *GQLResult {
	e.t.Helper()
	res, err := e.GraphQLDo(token, query, vars, out)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// GraphQLDo is GraphQL for a goroutine other than the test's (see Do): a
// request that fails or an answer that does not decode is returned as an
// error.
func (e *Env) GraphQLDo(token, query string, vars map[string]any, out any) (*GQLResult, error) {
	return e.GraphQLRequestDo(token, map[string]any{"query": query, "variables": vars}, out)
}

// GraphQLRequest posts request (the members of a GraphQL-over-HTTP request:
// query, variables, operationName, extensions; any may be left out) as
// token and decodes the answer as GraphQL does.
func (e *Env) GraphQLRequest(token string, request map[string]any, out any) *GQLResult {
	e.t.Helper()
	res, err := e.GraphQLRequestDo(token, request, out)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// GraphQLRequestDo is GraphQLRequest for a goroutine other than the test's.
func (e *Env) GraphQLRequestDo(token string, request map[string]any, out any) (*GQLResult, error) {
	body, _ := json.Marshal(request)
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/graphql", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/graphql-response+json, application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("graphql: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var env struct {
		Data       json.RawMessage `json:"data"`
		Errors     []GQLError      `json:"errors"`
		Extensions *GQLExtensions  `json:"extensions"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, fmt.Errorf("graphql answer %d does not decode: %w\n%s", resp.StatusCode, err, data)
	}
	if resp.Header.Get("Correlation-Id") == "" {
		e.t.Errorf("graphql: no Correlation-Id header")
	}
	// An answer with data (not null) ran, so its cost was counted and is
	// reported. A null data may come from a refusal before the count (the
	// selection limit) as well as from an error during execution.
	if len(env.Data) > 0 && string(env.Data) != "null" && (env.Extensions == nil || env.Extensions.Cost == nil) {
		e.t.Errorf("graphql: an answer with data has no extensions.cost: %s", data)
	}
	res := &GQLResult{Status: resp.StatusCode, Header: resp.Header, Errors: env.Errors, Data: env.Data, Extensions: env.Extensions}
	if out != nil && len(env.Data) > 0 && string(env.Data) != "null" {
		d := json.NewDecoder(bytes.NewReader(env.Data))
		d.DisallowUnknownFields()
		if err := d.Decode(out); err != nil {
			return nil, fmt.Errorf("graphql data does not decode into %T: %w\n%s", out, err, env.Data)
		}
	}
	return res, nil
}

// Post sends a message as the principal with handle who into thread and
// returns the REST answer (which the caller checks).
func (e *Env) Post(who, thread, clientMsgID, content string) *Response {
	e.t.Helper()
	return e.REST(http.MethodPost, "/api/v1/threads/"+thread+"/messages", e.World.Token(who),
		map[string]any{"client_msg_id": clientMsgID, "content_md": content})
}

// MustPost is Post that fails the test unless the answer is 201, and
// returns the message as a map.
func (e *Env) MustPost(who, thread, clientMsgID, content string) map[string]any {
	e.t.Helper()
	r := e.Post(who, thread, clientMsgID, content)
	if r.Status != http.StatusCreated {
		e.t.Fatalf("post by %s: %d %s", who, r.Status, r.Body)
	}
	var m map[string]any
	r.JSON(e.t, &m)
	return m
}

// MustREST sends a REST request with token and fails t unless the answer
// has status want; it returns the answer's JSON object (nil for an empty
// body).
func (e *Env) MustREST(t testing.TB, method, path, token string, body any, want int) map[string]any {
	t.Helper()
	r := e.REST(method, path, token, body)
	if r.Status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	var m map[string]any
	if len(r.Body) > 0 {
		r.JSON(t, &m)
	}
	return m
}

// InsertImport writes a message of origin import by the principal with
// handle who into thread, the way import tooling does: the server's import
// path, not the API (no client can send origin). It returns the message id.
func (e *Env) InsertImport(thread, who, content string) string {
	e.t.Helper()
	id := ids.New()
	ctx := context.Background()
	tx, err := e.Pool.Begin(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var seq int64
	if err := tx.QueryRow(ctx, `UPDATE threads SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq`, thread).Scan(&seq); err != nil {
		e.t.Fatalf("import seq: %v", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO messages (id, thread_id, thread_seq, author_principal_id, origin, kind, content_md, created_at)
		VALUES ($1, $2, $3, $4, 'import', 'text', $5, $6)`, id, thread, seq, e.World.ID(who), content, e.Clock.Now()); err != nil {
		e.t.Fatalf("import: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		e.t.Fatal(err)
	}
	return id
}

// StatementCounter is a pgx tracer that counts statements.
type StatementCounter struct {
	n    atomic.Int64
	mu   sync.Mutex
	seen []string
}

// TraceQueryStart counts one statement.
func (c *StatementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	c.mu.Lock()
	c.seen = append(c.seen, d.SQL)
	c.mu.Unlock()
	return ctx
}

// Since returns the statements counted after the first from (for
// messages when a count is off).
func (c *StatementCounter) Since(from int64) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int(from) > len(c.seen) {
		return nil
	}
	out := make([]string, 0, len(c.seen)-int(from))
	for _, q := range c.seen[from:] {
		if len(q) > 90 {
			q = q[:90]
		}
		out = append(out, q)
	}
	return out
}

// TraceQueryEnd does nothing.
func (c *StatementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Count returns the statements counted so far.
func (c *StatementCounter) Count() int64 { return c.n.Load() }

// Metric reads one sample of GET /metrics, for example
// `bothy_authz_errors_total{reason="filter_mismatch"}` (0 when absent).
func (e *Env) Metric(series string) float64 {
	e.t.Helper()
	resp, err := http.Get(e.URL + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				e.t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	return 0
}

// Buffer is an output sink (a process's output, a logger's lines) that
// other goroutines write while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Lines decodes every line written so far as one JSON object (the log's
// format); a line that is not JSON fails t.
func (b *Buffer) Lines(t testing.TB) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}
