package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/httpx"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/version"
	"bothy.example.com/bothy/internal/runs/domain"
)

// Readiness reasons of /readyz (503 service_unavailable).
const (
	ReasonDraining            = "draining"
	ReasonDatabaseUnreachable = "database_unreachable"
	ReasonMigrationsPending   = "migrations_pending"
	// ReasonSchemaNewer: the schema is newer than this binary can serve
	// (a contract migration it does not know; db.SchemaNewer).
	ReasonSchemaNewer  = "schema_newer"
	ReasonListenerDown = "listener_down"
)

// readiness answers /readyz cheaply: one check at a time runs through the
// pool (so probes never open sessions of their own), concurrent probes share
// its answer, and once the schema is current its version is cached, because
// a schema never moves backwards under a running binary.
type readiness struct {
	pool      *db.Pool
	timeout   time.Duration
	listening func() bool
	// retry, when set, has a listener that is down connect at once and
	// reports whether it did (runs.Hub.RetryNow). A probe that has just
	// seen the database answer calls it, so that readiness follows the
	// database within the probe instead of after the listener's backoff
	// (up to database.listen_backoff_max).
	retry func(ctx context.Context) bool

	draining atomic.Bool
	schema   atomic.Int64 // the schema version once it is current; 0 before

	mu     sync.Mutex
	at     time.Time
	reason string
}

// check returns the reason the server is not ready, or "" when it is.
func (r *readiness) check(ctx context.Context) string {
	if r.draining.Load() {
		return ReasonDraining
	}
	arrived := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.After(arrived) {
		// A check finished while this probe waited: share its answer.
		return r.reason
	}
	r.reason = r.run(ctx)
	r.at = time.Now()
	return r.reason
}

func (r *readiness) run(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.pool.Ping(ctx); err != nil {
		return ReasonDatabaseUnreachable
	}
	if r.schema.Load() == 0 {
		st, err := db.Compat(ctx, r.pool)
		if err != nil {
			return ReasonDatabaseUnreachable
		}
		switch st.Case {
		case db.SchemaBehind:
			return ReasonMigrationsPending
		case db.SchemaNewer:
			// Asked again at every probe: the answer only changes by an
			// upgrade of this binary, but an operator may fix the record.
			return ReasonSchemaNewer
		case db.SchemaCurrent, db.SchemaNewerServable:
			// Served: the schema version is remembered below.
		}
		r.schema.Store(st.Schema)
	}
	if !r.listening() && (r.retry == nil || !r.retry(ctx)) {
		return ReasonListenerDown
	}
	return ""
}

func (r *readiness) handler(w http.ResponseWriter, req *http.Request) {
	if reason := r.check(req.Context()); reason != "" {
		detail := map[string]string{
			ReasonDraining:            "the server is shutting down",
			ReasonDatabaseUnreachable: "the database does not answer",
			ReasonMigrationsPending:   "the database schema is older than this binary needs: run bothy migrate",
			ReasonSchemaNewer:         "the database schema is newer than this binary can serve: upgrade this binary",
			ReasonListenerDown:        "the LISTEN connection for long-poll wake-ups is down",
		}[reason]
		httpx.WriteProblem(w, req, problem.Newf(problem.Unavailable, reason, "%s", detail))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// poolCollector exports the pgx pool statistics at scrape time.
type poolCollector struct {
	pool                                             *db.Pool
	acquired, idle, total, max, waits, acquires, dur *prometheus.Desc
}

func newPoolCollector(pool *db.Pool) *poolCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &poolCollector{pool: pool,
		acquired: d("bothy_db_pool_acquired_connections", "Pool connections in use."),
		idle:     d("bothy_db_pool_idle_connections", "Idle pool connections."),
		total:    d("bothy_db_pool_total_connections", "Open pool connections."),
		max:      d("bothy_db_pool_max_connections", "Pool size (database.max_conns)."),
		waits:    d("bothy_db_pool_empty_acquire_total", "Acquires that waited because the pool was exhausted."),
		acquires: d("bothy_db_pool_acquire_total", "Connections acquired from the pool."),
		dur:      d("bothy_db_pool_acquire_duration_seconds_total", "Total time spent acquiring connections."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.waits, c.acquires, c.dur} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(s.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.dur, prometheus.CounterValue, s.AcquireDuration().Seconds())
}

// runStates are the states of runs.state, so that every state has a sample.
var runStates = domain.RunStates()

// runsCollector counts runs by state at scrape time (the runs module's
// count, bounded by timeout). A failed count exports nothing rather than
// zeros.
type runsCollector struct {
	count   func(ctx context.Context) (map[domain.RunState]int64, error)
	timeout time.Duration
	desc    *prometheus.Desc
}

// newRunsCollector returns the bothy_runs gauge over count.
func newRunsCollector(count func(ctx context.Context) (map[domain.RunState]int64, error), timeout time.Duration) *runsCollector {
	return &runsCollector{count: count, timeout: timeout, desc: prometheus.NewDesc("bothy_runs",
		"Runs by state, over the whole database.", []string{"state"}, nil)}
}

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		return
	}
	for _, s := range runStates {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	for s, n := range counts {
		if !slices.Contains(runStates, s) {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(s))
		}
	}
}

// opsMetrics registers the operational metrics that are not per request.
type opsMetrics struct {
	runTimeouts prometheus.Counter
}

func registerOps(reg prometheus.Registerer, pool *db.Pool, listening func() bool, reconnects, notifications func() uint64) *opsMetrics {
	m := &opsMetrics{
		runTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "bothy_run_timeouts_total",
			Help: "Runs this replica failed with reason timeout (run.start_timeout, run.stall_timeout)."}),
	}
	in := version.Get()
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "bothy_build_info",
		Help:        "Always 1; the labels name the running binary.",
		ConstLabels: prometheus.Labels{"version": in.Version, "revision": in.Revision, "goversion": in.GoVersion}})
	build.Set(1)
	reg.MustRegister(m.runTimeouts, build, newPoolCollector(pool),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "bothy_listener_connected",
			Help: "1 while the LISTEN connection for long-poll wake-ups is up."}, func() float64 {
			if listening() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bothy_listener_reconnects_total",
			Help: "Reconnects of the LISTEN connection."}, func() float64 { return float64(reconnects()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "bothy_listener_notifications_total",
			Help: "Notifications the LISTEN connection heard (wake-ups and live-box updates)."}, func() float64 { return float64(notifications()) }),
	)
	return m
}

// cors answers CORS preflights and marks cross-origin answers of the API
// faces (/graphql and /api/v1/) for the origins of http.cors_allowed_origins.
// Requests from other origins pass unmarked, so the browser refuses them.
type cors struct {
	origins map[string]bool
	any     bool
	maxAge  string
}

func newCORS(list string, maxAge time.Duration) *cors {
	c := &cors{origins: map[string]bool{}, maxAge: strconv.Itoa(int(maxAge / time.Second))}
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimRight(strings.TrimSpace(o), "/")
		switch o {
		case "":
		case "*":
			c.any = true
		default:
			c.origins[strings.ToLower(o)] = true
		}
	}
	return c
}

const (
	corsMethods = "GET, POST, PUT, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type, Accept, Correlation-Id, Bothy-Run-Holder, GraphQL-Require-Preflight"
	corsExpose  = "Correlation-Id, Retry-After, RateLimit, RateLimit-Policy, Idempotent-Replay, WWW-Authenticate"
)

func (c *cors) wrap(next http.Handler) http.Handler {
	if !c.any && len(c.origins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		api := r.URL.Path == "/graphql" || strings.HasPrefix(r.URL.Path, "/api/v1/")
		if !api || origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		if !c.any && !c.origins[strings.ToLower(origin)] {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Add("Vary", "Access-Control-Request-Method")
			w.Header().Add("Vary", "Access-Control-Request-Headers")
			w.Header().Set("Access-Control-Allow-Methods", corsMethods)
			w.Header().Set("Access-Control-Allow-Headers", corsHeaders)
			w.Header().Set("Access-Control-Max-Age", c.maxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Access-Control-Expose-Headers", corsExpose)
		next.ServeHTTP(w, r)
	})
}
