// Package moduletest is the module test harness of Bothy: it assembles the
// modules exactly as the server does (modules.New, the one wiring of the
// modules; no HTTP, GraphQL or REST is built) on a fresh cloned test
// database with the example world, so that a test of one module's rule
// calls that module's service directly:
//
//	env := moduletest.New(t)
//	alex := env.Principal("alex")
//	d, _, err := env.Authz.Authorize(t.Context(), alex, authz.MessageCreate, env.Thread("Support/Eskalation"))
//
// Flows that a client drives (status codes, problem shapes, both faces) stay
// black-box tests through internal/devtools/apitest, which builds on this harness and
// adds the server (internal/server over these modules) and its listener.
package moduletest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/modules"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
	"bothy.example.com/bothy/internal/world"
)

// Options adjust the assembled modules.
type Options struct {
	// Config changes keys of the default configuration (name to raw value).
	Config map[string]string
	// Logger receives the modules' logs (default: discarded).
	Logger *slog.Logger
	// Tracer sees every statement of the pool (to count them).
	Tracer pgx.QueryTracer
	// NoWorld starts on an empty (migrated) database, as a new
	// installation does; World is then empty.
	NoWorld bool
	// DatabaseURL, when set, is the (migrated, empty) database to use
	// instead of a fresh clone.
	DatabaseURL string
	// PoolURL, when set, is where the pool connects (a pooler in front of
	// DatabaseURL); it is also the server's database.url.
	PoolURL string
	// Hooks are the modules' test instruments (modules.Hooks), installed at
	// construction.
	Hooks modules.Hooks
}

// Start is the clock's time when a test begins.
var Start = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Env is the assembled modules with their database, clock and world. The
// module services are fields, so a test names the one it tests.
type Env struct {
	t testing.TB
	// Pool is the pool of the modules; DBURL the test database.
	Pool  *pgxpool.Pool
	DBURL string
	// PoolURL is where Pool connects (DBURL unless Options.PoolURL).
	PoolURL string
	Config  *config.Config
	Log     *slog.Logger
	Clock   *clock.Fake
	World   *world.World
	// Modules are the assembled modules with their metrics registry;
	// apitest serves them.
	Modules *modules.Set

	Identity  *identity.Service
	Authz     *authz.Service
	Chat      *chat.Service
	Messaging *messaging.Service
	Feed      *feed.Service
	Events    *events.Log
	Runs      *runs.Service
	Admin     *admin.Service
	// Writers are the modules' raw writers, for a test's setup.
	Writers modules.Writers
	DB      *db.DB
}

// New assembles the modules for t with the default configuration and the
// example world.
func New(t testing.TB) *Env {
	t.Helper()
	return Build(t, Options{})
}

// Build assembles the modules for t as opts say. The pool closes when t
// ends.
func Build(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx := context.Background()
	dbURL, w := database(t, opts)
	cfg := config.Defaults()
	// Each test's files in a folder of its own, unless the test names a
	// store (the S3 tests).
	cfg = cfg.MustWith(config.FilesStorage, "file://"+t.TempDir())
	for k, v := range opts.Config {
		var err error
		if cfg, err = cfg.With(k, v); err != nil {
			t.Fatalf("test config: %v", err)
		}
	}
	poolURL := dbURL
	if opts.PoolURL != "" {
		poolURL = opts.PoolURL
	}
	pool, err := db.Open(ctx, db.Options{URL: poolURL, MaxConns: cfg.Int(config.DatabaseMaxConns), Tracer: opts.Tracer,
		PoolerMode: cfg.Bool(config.DatabasePoolerMode)})
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	fc := clock.NewFake(Start)
	set, err := modules.New(modules.Deps{Config: cfg, Pool: pool, Clock: fc, Logger: log, Hooks: opts.Hooks})
	if err != nil {
		t.Fatalf("assemble the modules: %v", err)
	}
	if w == nil {
		w = &world.World{Principals: map[string]world.Principal{}, Spaces: map[string]string{}, Channels: map[string]world.Channel{}}
		if !opts.NoWorld {
			if w, err = buildWorld(ctx, set, pool); err != nil {
				t.Fatalf("%v", err)
			}
		}
	}
	return &Env{t: t, Pool: pool, DBURL: dbURL, PoolURL: poolURL, Config: cfg, Log: log, Clock: fc, World: w, Modules: set,
		Identity: set.Identity, Authz: set.Authz, Chat: set.Chat, Messaging: set.Messaging, Feed: set.Feed,
		Events: set.Events, Runs: set.Runs, Admin: set.Admin, Writers: set.Writers, DB: set.DB}
}

// database returns the test's database: the test's own, a clone of the
// migrated template (NoWorld), or a clone of the world template with
// that world's ids and tokens. The world is nil when the caller must
// still build it (a database of the test's own).
func database(t testing.TB, opts Options) (string, *world.World) {
	t.Helper()
	switch {
	case opts.DatabaseURL != "":
		return opts.DatabaseURL, nil
	case opts.NoWorld:
		return pgtest.URL(t), nil
	}
	name, w, err := exampleWorld()
	if err != nil {
		t.Fatalf("%v", err)
	}
	return pgtest.URLFrom(t, name), cloneWorld(w)
}

// worldTemplate is the template database of this test process with the
// example world in it, built on first use. Building the world takes some
// two hundred statements through the admin operations, several times what
// cloning a database costs; hundreds of tests start from it, so they
// clone it instead (docs/reliability.md#time).
var worldTemplate struct {
	once  sync.Once
	name  string
	world *world.World
	err   error
}

// cloneWorld returns a copy of w, so that a test that adds to its World
// changes no other test's.
func cloneWorld(w *world.World) *world.World {
	return &world.World{Principals: maps.Clone(w.Principals), Spaces: maps.Clone(w.Spaces), Channels: maps.Clone(w.Channels)}
}

// exampleWorld returns the world template's name and world, building it
// on first use: the modules with the default configuration, on the fake
// clock at Start as every test's, build the world into a fresh database
// that then becomes the template.
func exampleWorld() (string, *world.World, error) {
	worldTemplate.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		worldTemplate.name, worldTemplate.err = pgtest.NewTemplate(ctx, func(ctx context.Context, url string) error {
			w, err := fillWorld(ctx, url)
			worldTemplate.world = w
			return err
		})
	})
	return worldTemplate.name, worldTemplate.world, worldTemplate.err
}

// fillWorld builds the example world into the database at url and closes
// its connections.
func fillWorld(ctx context.Context, url string) (*world.World, error) {
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: 4})
	if err != nil {
		return nil, fmt.Errorf("open the world template: %w", err)
	}
	defer pool.Close()
	dir, err := os.MkdirTemp("", "bothy-world-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := config.Defaults().MustWith(config.FilesStorage, "file://"+dir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	set, err := modules.New(modules.Deps{Config: cfg, Pool: pool, Clock: clock.NewFake(Start), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("assemble the modules of the world template: %w", err)
	}
	return buildWorld(ctx, set, pool)
}

// buildWorld builds the example world through set and forgets the events
// and audit rows of building it.
func buildWorld(ctx context.Context, set *modules.Set, pool *pgxpool.Pool) (*world.World, error) {
	w, err := world.Build(ctx, world.Of(set))
	if err != nil {
		return nil, fmt.Errorf("build world: %w", err)
	}
	// The world is the fixture every test starts from: the events and audit
	// rows of building it (space.created, grant allows, ...) are not part of
	// what a test observes, so that a test of listEvents or of the audit
	// sees only what it did itself.
	if _, err := pool.Exec(ctx, `DELETE FROM event_log; DELETE FROM audit_log`); err != nil {
		return nil, fmt.Errorf("reset world events: %w", err)
	}
	return w, nil
}

// T returns the test the environment belongs to.
func (e *Env) T() testing.TB { return e.t }

// Principal returns the stored principal with handle h of the world (its
// status as stored now).
func (e *Env) Principal(h string) identity.Principal {
	e.t.Helper()
	p, err := e.Identity.Get(context.Background(), e.World.ID(h))
	if err != nil {
		e.t.Fatalf("principal %s: %v", h, err)
	}
	return p
}

// Main returns the main thread id of channel key "Space/Channel".
func (e *Env) Main(key string) string { return e.World.Channel(key).MainThreadID }

// Thread returns the authorization resource of the main thread of channel
// key "Space/Channel".
func (e *Env) Thread(key string) authz.Resource {
	return authz.Resource{Kind: authz.KindThread, ID: e.Main(key)}
}

// ChannelPath returns the authorization path of channel key "Space/Channel"
// as stored now (after any archiving of the test).
func (e *Env) ChannelPath(key string) authz.Path {
	e.t.Helper()
	p, err := e.Chat.Path(context.Background(), authz.KindChannel, e.World.Channel(key).ID)
	if err != nil || !p.Exists {
		e.t.Fatalf("channel path %s: %v (exists %v)", key, err, p.Exists)
	}
	return p
}

// ThreadPath returns the authorization path of thread id as stored now.
func (e *Env) ThreadPath(id string) authz.Path {
	e.t.Helper()
	p, err := e.Chat.ThreadPath(context.Background(), id)
	if err != nil || !p.Exists {
		e.t.Fatalf("thread path %s: %v (exists %v)", id, err, p.Exists)
	}
	return p
}

// Count runs a count query on the test database.
func (e *Env) Count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("count %q: %v", sql, err)
	}
	return n
}

// Exec runs a statement on the test database (to shape a test's world).
func (e *Env) Exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.Pool.Exec(context.Background(), sql, args...); err != nil {
		e.t.Fatalf("exec %q: %v", sql, err)
	}
}

// Metric returns the value of one series of the modules' registry, written
// as /metrics writes it (`name{label="value",...}`, labels sorted by name),
// or 0 when the series does not exist (yet).
func (e *Env) Metric(series string) float64 {
	e.t.Helper()
	fams, err := e.Modules.Registry.Gather()
	if err != nil {
		e.t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			if len(m.GetLabel()) > 0 {
				labels := make([]string, 0, len(m.GetLabel()))
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				name += "{" + strings.Join(labels, ",") + "}"
			}
			if name != series {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Untyped != nil:
				return m.GetUntyped().GetValue()
			}
		}
	}
	return 0
}

// RepoRoot returns the folder of the module's go.mod above the test's
// working directory, for tests that read the repository's own sources.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// AuditRows returns the audit rows of the principal with handle h.
func (e *Env) AuditRows(h string) []authz.AuditRow {
	e.t.Helper()
	rows, err := e.Authz.AuditRows(context.Background(), e.World.ID(h))
	if err != nil {
		e.t.Fatalf("audit rows of %s: %v", h, err)
	}
	return rows
}

// WantAudit fails the test unless the audit rows of the principal with
// handle h are want (none and an empty want are equal).
func (e *Env) WantAudit(h string, want []authz.AuditRow) {
	e.t.Helper()
	got := e.AuditRows(h)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		e.t.Fatalf("audit rows of %s:\n got %+v\nwant %+v", h, got, want)
	}
}

// Leak is a test hook standing for a faulty query: it appends what was
// added to every list it is handed. Leak[events.Event] is a feed.Hook,
// Leak[messaging.Message] a messaging.HistoryHook; pass it in
// Options.Hooks and Add the item that must never reach the reader.
type Leak[T any] struct {
	mu   sync.Mutex
	leak []T
}

// Add makes x part of every list handed to the hook from now on.
func (l *Leak[T]) Add(x T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leak = append(l.leak, x)
}

func (l *Leak[T]) appended(xs []T) []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append(xs, l.leak...)
}

// Events implements feed.Hook (for Leak[events.Event]).
func (l *Leak[T]) Events(xs []T) []T { return l.appended(xs) }

// History implements messaging.HistoryHook (for Leak[messaging.Message]).
func (l *Leak[T]) History(xs []T) []T { return l.appended(xs) }

// TriggerFault is an authz.Faults for tests: WithTrigger fails with the
// error last Set (none while it is nil). Pass it as Options.Hooks.Authz; it
// may be switched while requests run.
type TriggerFault struct {
	mu  sync.Mutex
	err error
}

// Set makes WithTrigger fail with err from now on (nil: succeed again).
func (f *TriggerFault) Set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// TriggerHolders implements authz.Faults.
func (f *TriggerFault) TriggerHolders() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Post writes a text message as the principal with handle who into thread
// through the messaging service (the same rules and subscribers as a
// client's post) and fails the test when it is refused.
func (e *Env) Post(who, thread, clientMsgID, content string) messaging.Message {
	e.t.Helper()
	m, _, err := e.Messaging.Create(context.Background(), e.Principal(who), thread, messaging.Input{ClientMsgID: clientMsgID, ContentMD: content})
	if err != nil {
		e.t.Fatalf("%s posts %q: %v", who, clientMsgID, err)
	}
	return m
}

// SetStatus sets the status of the principal with handle h (to disable an
// agent while a test's people write, say) and fails the test when it
// cannot.
func (e *Env) SetStatus(h string, status identity.Status) {
	e.t.Helper()
	if err := e.Writers.Identity.SetStatus(context.Background(), e.World.ID(h), status); err != nil {
		e.t.Fatalf("set the status of %s: %v", h, err)
	}
}

// WantProblem fails the test unless err is a problem with code and, when
// reason is not empty, that reason: the one check of a refusal that the
// module tests share.
func WantProblem(t testing.TB, what string, err error, code problem.Code, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %s", what, code)
	}
	if p := problem.From("moduletest.WantProblem", err); p.Code != code || (reason != "" && p.Reason != reason) {
		t.Fatalf("%s: %v, want %s (%s)", what, err, code, reason)
	}
}

// Batches calls purge with limit until it removes nothing and returns what
// each call removed, the last 0 included: the purges of retention work in
// batches, and a test asserts the batches themselves.
func Batches(t testing.TB, limit int, purge func(limit int) (int64, error)) []int64 {
	t.Helper()
	var removed []int64
	for {
		n, err := purge(limit)
		if err != nil {
			t.Fatal(err)
		}
		removed = append(removed, n)
		if n == 0 {
			return removed
		}
	}
}
