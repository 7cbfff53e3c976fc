// Package server wires Bothy together: configuration, database, modules,
// the GraphQL executor, the REST shim, the playground and the operational
// endpoints, behind one HTTP handler. main only parses flags and calls it.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/vektah/gqlparser/v2/ast"

	apidoc "bothy.example.com/bothy/docs/api"
	"bothy.example.com/bothy/graph"
	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/mcpface"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/modules"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/tracing"
	"bothy.example.com/bothy/internal/platform/version"
	"bothy.example.com/bothy/internal/playground"
	"bothy.example.com/bothy/internal/ratelimit"
	"bothy.example.com/bothy/internal/rest"
	"bothy.example.com/bothy/internal/retention"
	"bothy.example.com/bothy/internal/runs"
)

// Deps are what the server needs from its caller.
type Deps struct {
	Config *config.Config
	// Pool is the database pool; DatabaseURL is the same database's URL.
	Pool        *db.Pool
	DatabaseURL string
	// ListenURL is the URL of the LISTEN connection; empty uses the key
	// database.listen_url, then DatabaseURL.
	ListenURL string
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Limiter defaults to the buckets of ratelimit.store sized by the
	// config: shared through PostgreSQL, or in this process.
	Limiter ratelimit.Limiter
	// PlaygroundActAs are the principals the playground offers to act as,
	// tokens included: bothy dev passes the example world's, bothy serve
	// none.
	PlaygroundActAs []playground.Principal
	// Hooks are test instruments handed to the modules at construction;
	// production leaves them empty.
	Hooks Hooks
	// Modules, when set, are the modules to serve (the module test harness
	// assembles them first); Limiter and Hooks are then theirs. Nil
	// assembles them here.
	Modules *modules.Set
}

// Hooks are the modules' test instruments (modules.Hooks).
type Hooks = modules.Hooks

// Server is the assembled HTTP server.
type Server struct {
	cfg     *config.Config
	log     *slog.Logger
	handler http.Handler
	shim    *rest.Shim
	// The module services, for the world builder and tests.
	Identity  *identity.Service
	Authz     *authz.Service
	Chat      *chat.Service
	Messaging *messaging.Service
	Feed      *feed.Service
	Events    *events.Log
	Runs      *runs.Service
	DB        *db.DB
	Admin     *admin.Service
	Retention *retention.Service

	pool      *db.Pool
	hub       *runs.Hub
	listenURL string
	ready     *readiness
	ops       *opsMetrics
	metrics   http.Handler // nil when /metrics is on the API listener
	gatherer  prometheus.Gatherer
	metricsLn atomic.Pointer[net.Listener]
	// apiAddr is the address Serve listens on: what the MCP face names
	// when http.public_url is empty (publicURL).
	apiAddr  atomic.Pointer[string]
	inflight *inflight
	outage   *outage
	modules  *modules.Set
	live     *live
	// tracing exports the spans of requests (tracing.otlp_endpoint); Serve
	// shuts it down, exporting what is queued.
	tracing *tracing.Provider
}

// New assembles the server. It fails when a stored REST operation does not
// validate against the schema, which is a programming error.
func New(d Deps) (*Server, error) {
	d, set, err := withModules(d)
	if err != nil {
		return nil, err
	}
	cfg := d.Config
	proxies, err := checkServing(cfg)
	if err != nil {
		return nil, err
	}
	reg := set.Registry
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := httpx.NewMetrics(reg, cfg.Int(config.MetricsMaxOperations))
	hub := set.Hub
	ops := registerOps(reg, d.Pool, hub.Connected, hub.Reconnects, hub.Notifications)
	if err := checkFiles(set.Files); err != nil {
		return nil, err
	}
	reg.MustRegister(newRunsCollector(set.Runs.CountByState, cfg.Duration(config.ServerReadinessTimeout)))
	out := newOutage(d.Pool, d.Logger, cfg.Duration(config.DatabaseOutageRetryAfter))
	es := newExecutableSchema(d, set)
	ws := newLive(cfg, set.Identity, set.Tokens, hub, d.Logger)
	registerLiveGauges(reg, ws)
	exec, err := newExecutor(es, d, set, metrics, out, ws)
	if err != nil {
		return nil, err
	}
	shim, err := rest.New(es.Schema(), exec, rest.Table(), cfg.Int(config.GraphQLMaxResponseBytes))
	if err != nil {
		return nil, err
	}

	s := &Server{cfg: d.Config, log: d.Logger, shim: shim, pool: d.Pool, hub: hub, live: ws, Identity: set.Identity, Authz: set.Authz,
		Chat: set.Chat, Messaging: set.Messaging, Feed: set.Feed, Events: set.Events, Runs: set.Runs, DB: set.DB, Admin: set.Admin,
		listenURL: d.ListenURL, ops: ops, gatherer: reg, Retention: set.Retention, modules: set,
		ready:    &readiness{pool: d.Pool, timeout: cfg.Duration(config.ServerReadinessTimeout), listening: hub.Connected},
		inflight: newInflight(cfg.Int(config.HTTPMaxConcurrentPerPrincipal), cfg.Duration(config.HTTPMaxConcurrentWait)), outage: out}
	mux := http.NewServeMux()
	s.routeAPI(mux, exec, es.Schema(), ws, set.Files)
	// A probe retries a listener that is down once it has seen the
	// database answer (runs.Hub.RetryNow).
	s.ready.retry = hub.RetryNow
	mux.HandleFunc("GET /readyz", s.ready.handler)
	s.routeMetrics(mux, reg, proxies)
	s.routeFaces(mux, d, set, proxies)
	if err := s.finishHandler(mux, metrics, proxies); err != nil {
		return nil, err
	}
	return s, nil
}

// withModules returns d with its defaults filled in, and the modules to
// serve: d's own, or assembled here.
func withModules(d Deps) (Deps, *modules.Set, error) {
	// The clock is the modules' (modules.New defaults it); the logger is
	// the faces' too.
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	cfg := d.Config
	set := d.Modules
	if set == nil {
		var err error
		set, err = modules.New(modules.Deps{Config: cfg, Pool: d.Pool, Clock: d.Clock, Logger: d.Logger, Limiter: d.Limiter, Hooks: d.Hooks})
		if err != nil {
			return d, nil, err
		}
	}
	if d.ListenURL == "" {
		d.ListenURL = cfg.String(config.DatabaseListenURL)
	}
	if d.ListenURL == "" {
		d.ListenURL = d.DatabaseURL
	}
	return d, set, nil
}

// checkServing checks the keys of how the server is reached (trusted
// proxies, public URL, profiles) and returns the trusted proxies.
func checkServing(cfg *config.Config) (httpx.Proxies, error) {
	proxies, err := httpx.ParseProxies(cfg.String(config.HTTPTrustedProxies))
	if err != nil {
		return httpx.Proxies{}, err
	}
	if err := checkPublicURL(cfg.String(config.HTTPPublicURL)); err != nil {
		return httpx.Proxies{}, err
	}
	if cfg.Bool(config.MetricsPprof) && cfg.String(config.MetricsAddr) == "" {
		// Profiles show the process's insides: never on the API's address.
		return httpx.Proxies{}, errors.New("metrics.pprof needs metrics.addr: profiles are served on the separate metrics listener only")
	}
	return proxies, nil
}

// checkFiles opens the blob store and checks the scanner of the files
// module, so that a store the server cannot open stops it at start, not at
// the first upload.
func checkFiles(fs *files.Service) error {
	if err := fs.OpenStorage(context.Background()); err != nil {
		return err
	}
	// A scanner that is no clamd stops it too; one that does not answer is
	// logged and may come back (files.Service.CheckScanner).
	return fs.CheckScanner(context.Background())
}

// newExecutableSchema binds the GraphQL schema to the resolvers over the
// modules of set, with the configured list bounds of the cost estimate;
// the events subscriptions of one principal and document render each
// message event once (graph.RenderOnce).
func newExecutableSchema(d Deps, set *modules.Set) graphql.ExecutableSchema {
	cfg := d.Config
	resolver := &graph.Resolver{Identity: set.Identity, Authz: set.Authz, Chat: set.ChatUseCases,
		Messaging: set.Messaging, Admin: set.Admin, Feed: set.Feed, Fanout: set.Fanout, Tokens: set.Tokens, Runs: set.Runs, Files: set.Files,
		ContextLimits: runs.ContextLimits{MaxBytes: cfg.Int(config.AgentContextMaxBytes), MessageMaxBytes: cfg.Int(config.AgentContextMessageMaxBytes)},
		Live:          graph.Live{SendQueue: cfg.Int(config.WebsocketSendQueue), Log: d.Logger, Verdicts: graph.NewLiveVerdicts(d.Clock)}}
	return graph.RenderOnce(generated.NewExecutableSchema(generated.Config{Schema: graph.Schema(), Resolvers: resolver, Complexity: Complexity(ListBounds{
		EventsDefault: cfg.Int(config.EventsListLimitDefault), EventsMax: cfg.Int(config.EventsListLimitMax),
		MessagesDefault: cfg.Int(config.MessageListLimitDefault), MessagesMax: cfg.Int(config.MessageListLimitMax),
		ContextItems: contextItems, NestedItems: nestedItems})}))
}

// registerLiveGauges registers the gauges of the WebSocket connections and
// subscriptions ws serves.
func registerLiveGauges(reg prometheus.Registerer, ws *live) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bothy_websocket_connections",
		Help: "WebSocket connections this replica serves now (GraphQL subscriptions)."}, func() float64 { return float64(ws.Open()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bothy_websocket_subscriptions",
			Help: "Subscriptions running on this replica's WebSocket connections now."}, func() float64 { return float64(ws.Subscriptions()) }))
}

// newExecutor returns the GraphQL executor over es with its transports
// and the extensions every response needs.
func newExecutor(es graphql.ExecutableSchema, d Deps, set *modules.Set, metrics *httpx.Metrics, out *outage, ws *live) (*handler.Server, error) {
	cfg := d.Config
	// The REST shim's calls come first: they ride in the context and
	// never reach a client's transport.
	exec, err := newGraphQL(es, d.Config, d.Logger, metrics, out, rest.Transport{}, ws.transport(), transport.MultipartForm{
		// The whole request, files.max_bytes and the operation besides; a
		// file above the memory bound spills to a temporary file.
		MaxUploadSize: int64(cfg.Int(config.FilesMaxBytes)) + multipartOverhead, MaxMemory: 1 << 20})
	if err != nil {
		return nil, err
	}
	// Every response, and every event of a subscription, resolves with its
	// own loaders.
	sources := graph.Sources{Identity: set.Identity, Runs: set.Runs, Chat: set.Chat, Authz: set.Authz, Files: set.Files}
	exec.Use(graph.PerResponse{Sources: sources})
	exec.Use(SingleRootSubscription{})
	return exec, nil
}

// bodyLimit limits the body of a request before h reads it. An upload
// (multipart) takes the body limit and read deadline of files
// (files.max_bytes, files.upload_timeout) and streams; every other body
// http.max_body_bytes, read whole.
func (s *Server) bodyLimit(h http.Handler) http.Handler {
	upload := limitUpload(int64(s.cfg.Int(config.FilesMaxBytes)), s.cfg.Duration(config.FilesUploadTimeout), h)
	other := httpx.LimitBody(int64(s.cfg.Int(config.HTTPMaxBodyBytes)), h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && isMultipart(r) {
			upload.ServeHTTP(w, r)
			return
		}
		other.ServeHTTP(w, r)
	})
}

// authed serves h to authenticated requests. Authentication comes before
// the body is read: an unauthenticated client cannot make the server
// buffer http.max_body_bytes. The meter of rate-limit tokens wraps it all,
// so that every answer of a request that spent one says what is left.
func (s *Server) authed(h http.Handler) http.Handler {
	return meterRateLimit(s.authenticate(s.capConcurrency(s.bodyLimit(
		writeDeadlines(s.cfg.Duration(config.HTTPWriteTimeout), s.cfg.Duration(config.EventsPollMaxWait), h)))))
}

// routeAPI routes the API on mux: GraphQL over HTTP and WebSocket, the
// REST shim and files, and the documents that describe them.
func (s *Server) routeAPI(mux *http.ServeMux, exec *handler.Server, schema *ast.Schema, ws *live, fs *files.Service) {
	gql := capResponse(s.cfg.Int(config.GraphQLMaxResponseBytes), exec)
	// WebSocket upgrades authenticate in connection_init; subscriptions
	// resolve each event with its own loaders (graph.PerResponse).
	mux.Handle("/graphql", ws.route(exec, graphQLRefusals(requirePreflight(s.authed(refuseTrailing(overHTTP(gql)))))))
	s.shim.Register(mux, s.authed)
	mux.Handle("GET /api/v1/files/{file_id}", s.authed(serveFile(fs)))
	mux.Handle("GET /api/v1", apiIndex(s.shim.Routes()))
	mux.HandleFunc("GET /api/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(apidoc.OpenAPI())
	})
	// The schema as SDL for client generators (docs/clients.md), where
	// introspection would show it anyway.
	if s.cfg.Bool(config.GraphQLIntrospection) {
		sdl := schemaSDL(schema)
		mux.HandleFunc("GET /api/schema.graphql", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/graphql; charset=utf-8")
			w.Write(sdl)
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// routeMetrics serves the metrics of reg: on mux when metrics.addr is
// empty, else on the metrics listener's own handler (s.metrics), with the
// profiles when metrics.pprof is on.
func (s *Server) routeMetrics(mux *http.ServeMux, reg *prometheus.Registry, proxies httpx.Proxies) {
	promh := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelError)})
	if s.cfg.String(config.MetricsAddr) == "" {
		mux.Handle("GET /metrics", promh)
		return
	}
	// The metrics listener answers every path with the metrics, as it
	// always did, and refuses other methods like the API listener.
	mm := http.NewServeMux()
	mm.Handle("GET /", promh)
	if s.cfg.Bool(config.MetricsPprof) {
		// Profiles (CPU, heap, goroutines, traces) on the metrics
		// listener alone, which the operator keeps off the network
		// clients reach (docs/operations.md#profiles).
		mm.HandleFunc("GET /debug/pprof/", pprof.Index)
		mm.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mm.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mm.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mm.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	mm.Handle("/", unmatched(mm))
	s.metrics = httpx.ChainWith(mm, httpx.Options{Log: s.log, Proxies: proxies})
}

// routeFaces routes the faces beside the API on mux (MCP, sign-in, the
// playground), and last the answer for every request no route takes.
func (s *Server) routeFaces(mux *http.ServeMux, d Deps, set *modules.Set, proxies httpx.Proxies) {
	// The MCP face calls the API through the whole handler, as any client
	// (docs/mcp.md). A request to /mcp is one request against the
	// principal's in-flight cap, and its answer reports the lowest bucket
	// its tools' API calls spent from (the meters nest).
	mcpface.Register(mux, mcpface.Deps{API: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }),
		Authenticate: set.Identity.Authenticate, MaxWait: s.cfg.Duration(config.EventsPollMaxWait), MaxBody: int64(s.cfg.Int(config.HTTPMaxBodyBytes)),
		Client: proxies.Client, PublicURL: s.publicURL, Admit: func(h http.Handler) http.Handler { return meterRateLimit(s.capConcurrency(h)) },
		Provider: mcpProvider(set)})
	signInURL := ""
	if set.SignIn != nil {
		set.SignIn.Register(mux)
		signInURL = "/auth/login"
	}
	playground.New("/graphql", playground.Options{ActAs: d.PlaygroundActAs, SignInURL: signInURL}).Register(mux)
	// Every request no route takes, under /api/v1/ too: 405 with Allow for
	// a known path, 404 otherwise.
	mux.Handle("/", unmatched(mux))
}

// finishHandler sets the server's handler: mux behind tracing, the
// database limits, CORS and the common chain of every request.
func (s *Server) finishHandler(mux *http.ServeMux, metrics *httpx.Metrics, proxies httpx.Proxies) error {
	cfg := s.cfg
	// The request span is outermost, so that it times the whole request
	// and every log line of the request has it in its context; the mux
	// notes its route on it.
	tp, err := tracing.New(tracing.OptionsFrom(cfg, version.Get().Version, s.log))
	if err != nil {
		return err
	}
	s.tracing = tp
	var routed http.Handler = mux
	if tp.Enabled() {
		routed = tracing.Route(mux)
		s.log.Info("tracing on: spans go to the OpenTelemetry collector", "otlp_url", tp.URL)
	}
	routed = databaseLimits(db.Limits{Query: cfg.Duration(config.DatabaseQueryTimeout), Acquire: cfg.Duration(config.DatabaseAcquireTimeout)}, routed)
	// No body limit out here: authed reads the body only after the token
	// is checked, so an unauthenticated client cannot make it buffer one.
	s.handler = tracing.Handler(tp, httpx.ChainWith(newCORS(cfg.String(config.HTTPCORSAllowedOrigins), cfg.Duration(config.HTTPCORSMaxAge)).wrap(routed),
		httpx.Options{Log: s.log, Metrics: metrics, Proxies: proxies}))
	return nil
}

// Handler returns the HTTP handler of the whole server.
func (s *Server) Handler() http.Handler { return s.handler }

// Routes returns the REST route table as compiled by the shim.
func (s *Server) Routes() []rest.Route { return s.shim.Routes() }

// authenticate resolves the bearer token into the request's principal. A
// missing, unknown, revoked or expired token, or an inactive principal,
// answers 401 unauthorized in the shape of the face: problem+json on REST,
// a GraphQL error document on /graphql.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r.Header.Get("Authorization"))
		var p identity.Principal
		var provider bool
		err := problem.New(problem.Unauthorized, "")
		if ok {
			var authErr error
			p, provider, authErr = s.authenticateToken(r.Context(), tok)
			err = problem.From("server.authenticate", s.outage.classify(r.Context(), authErr))
		}
		if err != nil {
			if err.Code == problem.Unauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="bothy"`)
			}
			s.refuse(w, r, err)
			return
		}
		httpx.NotePrincipal(r.Context(), p.ID)
		ctx := identity.WithPrincipal(r.Context(), p)
		if !provider {
			// The token of a long poll's re-check (stream.Service.stillAuthorized):
			// a Bothy token; a provider's is re-checked by the person's
			// status instead.
			ctx = identity.WithToken(ctx, tok)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(prefix):])
	return tok, tok != ""
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// Serve answers requests on ln until ctx ends, then drains:
//
//  1. /readyz answers 503 draining for server.drain_delay, so that load
//     balancers stop sending new requests while the listener still accepts;
//  2. the listener closes, waiting long polls answer what they have, and
//     requests in flight finish;
//  3. whatever still runs when server.shutdown_timeout (counted from the
//     end of ctx, the delay included) is over is cancelled and logged.
//
// A drain that had to cancel is still a clean stop: Serve returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	addr := ln.Addr().String()
	s.apiAddr.Store(&addr)
	if s.cfg.String(config.HTTPPublicURL) == "" {
		s.log.Warn("http.public_url is not set: the MCP face names the listen address as its resource; set it to the URL clients use",
			"listen_url", "http://"+addr)
	}
	// The spans still queued go out before Serve returns, within what is
	// left of server.shutdown_timeout once draining started (a failed
	// start gives them the whole timeout). Deferred before the background
	// work's stop, so it runs after it: a sweep's spans that end while it
	// stops are exported too.
	var deadline time.Time
	defer func() { s.stopTracing(deadline) }()
	stopBackground := s.startBackground(ctx)
	defer stopBackground()

	reqCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	errLog := slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:  s.cfg.Duration(config.HTTPReadTimeout),
		WriteTimeout: s.cfg.Duration(config.HTTPWriteTimeout),
		IdleTimeout:  s.cfg.Duration(config.HTTPIdleTimeout),
		// net/http's own error lines (TLS, hijack, panics it recovers) go
		// through the one JSON logger too.
		ErrorLog:    errLog,
		BaseContext: func(net.Listener) context.Context { return reqCtx }}
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	var ms *http.Server
	if s.metrics != nil {
		mln, err := net.Listen("tcp", s.cfg.String(config.MetricsAddr))
		if err != nil {
			hs.Close()
			return fmt.Errorf("metrics.addr: %w", err)
		}
		s.metricsLn.Store(&mln)
		ms = &http.Server{Handler: s.metrics, ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
		go func() { errc <- ms.Serve(mln) }()
	}
	select {
	case err := <-errc:
		hs.Close()
		if ms != nil {
			ms.Close()
		}
		return err
	case <-ctx.Done():
	}

	deadline = time.Now().Add(s.cfg.Duration(config.ServerShutdownTimeout))
	delay := min(s.cfg.Duration(config.ServerDrainDelay), time.Until(deadline))
	s.ready.draining.Store(true)
	// No new request on a kept-alive connection from now on: a proxy that
	// reuses an idle connection just as the listener closes would get an
	// error.
	hs.SetKeepAlivesEnabled(false)
	s.log.Info("drain started: readiness answers 503 draining", "phase", "not_ready", "drain_delay_ms", delay.Milliseconds())
	time.Sleep(delay)
	s.log.Info("drain: listener closed, waiting for requests in flight", "phase", "closing")
	s.hub.Stop()
	s.shutdown(hs, cancelRequests, deadline)
	if ms != nil {
		ms.Close()
	}
	return nil
}

// startBackground starts the server's background work (the hub's LISTEN,
// the run sweep, retention, the live boxes, sign-in's recheck) on a
// context that outlives ctx: it must keep running while requests drain.
// The returned stop ends it and waits for all of it.
func (s *Server) startBackground(ctx context.Context) (stop func()) {
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(4)
	connect := func(ctx context.Context) (*db.Conn, error) { return db.Connect(ctx, s.listenURL) }
	go func() {
		defer wg.Done()
		s.hub.Listen(bg, connect, s.cfg.Duration(config.DatabaseListenBackoffMax), s.log)
	}()
	go func() {
		defer wg.Done()
		s.Runs.Sweep(tracing.WithProvider(bg, s.tracing), s.cfg.Duration(config.RunSweepInterval), func(n int) { s.ops.runTimeouts.Add(float64(n)) })
	}()
	go func() { defer wg.Done(); s.Retention.Run(bg, s.cfg.Duration(config.RetentionInterval)) }()
	go func() { defer wg.Done(); s.Runs.RunLive(bg) }()
	if s.modules.SignIn != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.modules.SignIn.Recheck(bg) }()
	}
	return func() { stopBG(); wg.Wait() }
}

// shutdown waits for the requests in flight until deadline; past it, it
// cancels their context and closes hs. The drain is a clean stop either
// way: it only logs which it was.
func (s *Server) shutdown(hs *http.Server, cancelRequests context.CancelFunc, deadline time.Time) {
	sctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err == nil {
		// Shutdown does not wait for hijacked connections: the WebSockets
		// close themselves with 1012 once the hub stopped, and the
		// requests' context must outlive their close frames (its end
		// makes gqlgen close with 1000, which clients take for the end).
		err = s.live.drained(sctx)
	}
	if err != nil {
		cancelRequests()
		hs.Close()
		s.log.Warn("drain: server.shutdown_timeout reached, requests in flight cancelled", "phase", "cancelled")
	} else {
		s.log.Info("drain: requests in flight finished", "phase", "finished")
	}
}

// stopTracing shuts the tracing exporter down by deadline (zero: within
// server.shutdown_timeout from now), exporting the spans still queued.
func (s *Server) stopTracing(deadline time.Time) {
	if !s.tracing.Enabled() {
		return
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(s.cfg.Duration(config.ServerShutdownTimeout))
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := s.tracing.Shutdown(ctx); err != nil {
		s.log.Warn("tracing: spans still queued at server.shutdown_timeout were dropped", "error", err.Error())
	}
}

// MetricsAddr returns the address of the separate /metrics listener once
// Serve opened it (metrics.addr), or "" when there is none (yet).
func (s *Server) MetricsAddr() string {
	if ln := s.metricsLn.Load(); ln != nil {
		return (*ln).Addr().String()
	}
	return ""
}

// LongPolls returns the long polls of this process as tests observe them:
// a test waits for a poll to park instead of sleeping.
func (s *Server) LongPolls() runs.Waiters { return s.hub }

// Gatherer returns the registry behind /metrics, for tests that read a
// module's metric without HTTP.
func (s *Server) Gatherer() prometheus.Gatherer { return s.gatherer }

// SchemaVersion returns the schema version readiness last saw current, 0
// before the first successful check.
func (s *Server) SchemaVersion() int64 { return s.ready.schema.Load() }

// Modules returns the modules the server serves.
func (s *Server) Modules() *modules.Set { return s.modules }

// publicURL is the URL clients use to reach the server: http.public_url,
// or the address Serve listens on. Never a request's Host, which a client
// chooses (docs/operations.md#the-public-url).
func (s *Server) publicURL() string {
	if u := s.cfg.String(config.HTTPPublicURL); u != "" {
		return strings.TrimSuffix(u, "/")
	}
	if a := s.apiAddr.Load(); a != nil {
		return "http://" + *a
	}
	return "http://" + s.cfg.String(config.ServerAddr)
}

// checkPublicURL accepts an empty http.public_url or an absolute http or
// https URL with a host and no path, query or fragment.
func checkPublicURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("http.public_url %q: want scheme://host[:port] with scheme http or https and no path", raw)
	}
	return nil
}
