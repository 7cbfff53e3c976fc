// Package server wires Bothy together: configuration, database, modules,
// the GraphQL executor, the REST shim, the playground and the operational
// endpoints, behind one HTTP handler. main only parses flags and calls it.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	apidoc "bothy.example.com/bothy/docs/api"
	"bothy.example.com/bothy/graph"
	"bothy.example.com/bothy/graph/generated"
	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/playground"
	"bothy.example.com/bothy/internal/ratelimit"
	"bothy.example.com/bothy/internal/rest"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/world"
)

// Deps are what the server needs from its caller.
type Deps struct {
	Config *config.Config
	// Pool is the database pool; DatabaseURL is the same database's URL,
	// used by /readyz to check that migrations are current.
	Pool        *pgxpool.Pool
	DatabaseURL string
	// Clock defaults to the wall clock.
	Clock clock.Clock
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Limiter defaults to in-process buckets sized by the config.
	Limiter ratelimit.Limiter
}

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
	Runs      *runs.Service
	UoW       *db.UnitOfWork
	Admin     *admin.Service

	pool *pgxpool.Pool
	hub  *runs.Hub
}

// New assembles the server. It fails when a stored REST operation does not
// validate against the schema, which is a programming error.
func New(d Deps) (*Server, error) {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Limiter == nil {
		d.Limiter = ratelimit.NewMemory(d.Config, d.Clock)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := httpx.NewMetrics(reg)

	cfg := d.Config
	ident := identity.NewService(d.Pool, d.Clock)
	uow := db.NewUnitOfWork(d.Pool, cfg.Int(config.DatabaseTxRetryMax))
	az := authz.NewService(d.Pool, d.Clock, d.Limiter, cfg.Duration(config.AuditDenyAggregateWindow), d.Logger, reg)
	chatSvc := chat.NewService(d.Pool, d.Clock, cfg.Int(config.ChannelHistoryBackfillLimitDefault), cfg.Int(config.ChannelHistoryBackfillLimitMax))
	evLog := events.NewLog(d.Pool, d.Clock)
	msg := messaging.NewService(d.Pool, uow, d.Clock, ident, chatSvc, az, evLog, messaging.Limits{
		MaxContentBytes: cfg.Int(config.MessageMaxContentBytes), ListContentMaxBytes: cfg.Int(config.MessageListContentMaxBytes),
		ListLimitDefault: cfg.Int(config.MessageListLimitDefault), ListLimitMax: cfg.Int(config.MessageListLimitMax)})
	msg.Instrument(reg)
	az.Register(chatSvc, authz.KindSpace, authz.KindChannel, authz.KindThread)
	az.Register(msg, authz.KindMessage)
	az.Register(az, authz.KindGrant)
	hub := runs.NewHub()
	runSvc := runs.NewService(runs.Deps{Pool: d.Pool, UoW: uow, Clock: d.Clock, Log: d.Logger, Identity: ident, Chat: chatSvc,
		Authz: az, Messaging: msg, Events: evLog, Hub: hub, PollMaxWait: cfg.Duration(config.EventsPollMaxWait),
		Timeouts: runs.Timeouts{Start: cfg.Duration(config.RunStartTimeout), Stall: cfg.Duration(config.RunStallTimeout),
			Lease: cfg.Duration(config.RunLeaseTimeout), MaxAttempts: cfg.Int(config.RunMaxAttempts), CancelGrace: cfg.Duration(config.RunCancelGrace)}})
	az.Register(runSvc, authz.KindRun)
	adm := admin.NewService(d.Pool, uow, az, chatSvc, ident, evLog, admin.Options{TokenTTL: cfg.Duration(config.TokenDefaultTTL),
		PrincipalListDefault: cfg.Int(config.AdminPrincipalListLimitDefault), PrincipalListMax: cfg.Int(config.AdminPrincipalListLimitMax),
		Runs: runSvc})
	az.Register(adm, authz.KindInstance, authz.KindPrincipal, authz.KindGroup, authz.KindToken)
	fd := feed.NewService(az, chatSvc, evLog, cfg.Int(config.EventsListLimitDefault), cfg.Int(config.EventsListLimitMax))
	resolver := &graph.Resolver{Identity: ident, Limiter: d.Limiter, Chat: chat.NewUseCases(chatSvc, az, evLog, uow),
		Messaging: msg, Admin: adm, Feed: fd, Runs: runSvc, Holders: az,
		ContextLimits: runs.ContextLimits{MaxBytes: cfg.Int(config.AgentContextMaxBytes), MessageMaxBytes: cfg.Int(config.AgentContextMessageMaxBytes)},
		Live:          graph.Live{SendQueue: cfg.Int(config.WebsocketSendQueue), Log: d.Logger}}
	es := generated.NewExecutableSchema(generated.Config{Resolvers: resolver})
	ws := newLive(cfg, ident, hub, d.Logger)
	exec := newGraphQL(es, d.Config, d.Logger, ws.transport())
	gql := graph.WithLoaders(graph.Sources{Identity: ident, Holders: az, Runs: runSvc}, exec)
	shim, err := rest.New(es.Schema(), gql, rest.Table)
	if err != nil {
		return nil, err
	}

	s := &Server{cfg: d.Config, log: d.Logger, shim: shim, pool: d.Pool, hub: hub, Identity: ident, Authz: az, Chat: chatSvc,
		Messaging: msg, Feed: fd, Runs: runSvc, UoW: uow, Admin: adm}
	authed := func(h http.Handler) http.Handler { return s.authenticate(h) }
	mux := http.NewServeMux()
	// WebSocket upgrades authenticate in connection_init; subscriptions
	// resolve with fresh loaders per event (no request-wide cache).
	mux.Handle("/graphql", ws.route(exec, authed(overHTTP(gql))))
	shim.Register(mux, authed)
	mux.HandleFunc("GET /api/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(apidoc.OpenAPI)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := d.Pool.Ping(ctx); err != nil {
			httpx.WriteProblem(w, r, problem.Newf(problem.Unavailable, "database_unreachable", "the database does not answer"))
			return
		}
		if pending, err := db.Pending(ctx, d.DatabaseURL); err != nil || pending {
			httpx.WriteProblem(w, r, problem.Newf(problem.Unavailable, "migrations_pending", "the database schema is not current"))
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	playground.New("/graphql").Register(mux)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteProblem(w, r, problem.New(problem.NotFound, ""))
	}))

	body := httpx.LimitBody(int64(cfg.Int(config.HTTPMaxBodyBytes)), mux)
	s.handler = httpx.Chain(body, d.Logger, metrics)
	return s, nil
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
		err := problem.New(problem.Unauthorized, "")
		if ok {
			var authErr error
			p, authErr = s.Identity.Authenticate(r.Context(), tok)
			err = problem.From(authErr)
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bothy"`)
			if r.URL.Path == "/graphql" {
				pe := problem.From(err)
				if pe.Code == problem.InternalError && pe.Cause() != nil {
					s.log.ErrorContext(r.Context(), "authentication failed", "correlation_id", httpx.CorrelationID(r.Context()), "error", pe.Cause().Error())
				}
				writeJSON(w, pe.Code.Status(), map[string]any{"errors": []any{map[string]any{
					"message": pe.Code.Title(), "extensions": map[string]any{"code": string(pe.Code), "status": pe.Code.Status()},
				}}})
				return
			}
			httpx.WriteProblem(w, r, err)
			return
		}
		httpx.NotePrincipal(r.Context(), p.ID)
		next.ServeHTTP(w, r.WithContext(identity.WithToken(identity.WithPrincipal(r.Context(), p), tok)))
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

// Serve answers requests on ln until ctx ends, then shuts down gracefully,
// waiting up to server.shutdown_timeout for requests in flight.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.hub.Listen(bg, s.pool, s.log) }()
	go func() { defer wg.Done(); s.Runs.Sweep(bg, s.cfg.Duration(config.RunSweepInterval)) }()
	defer func() { stopBG(); wg.Wait() }()
	hs := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.hub.Stop()
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.Duration(config.ServerShutdownTimeout))
	defer cancel()
	err := hs.Shutdown(sctx)
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

// World returns the services the example world builder works through.
func (s *Server) World() world.Services {
	return world.Services{Identity: s.Identity, Chat: s.Chat, Authz: s.Authz, Admin: s.Admin}
}
