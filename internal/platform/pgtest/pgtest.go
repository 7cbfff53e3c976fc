// Package pgtest gives tests a fresh, fully migrated PostgreSQL database in
// a few milliseconds each.
//
// The server comes, in this order, from:
//
//  1. the environment variable BOTHY_TEST_DATABASE_URL, a URL (or keyword
//     string) of a server on which the harness may create and drop
//     databases (CREATEDB); its database is used only to administer;
//  2. a testcontainers-go PostgreSQL 15 container, when a Docker engine
//     answers (set TESTCONTAINERS_RYUK_DISABLED=true where the reaper
//     container cannot run);
//  3. an ephemeral cluster of the PostgreSQL server binaries installed on
//     the machine (package pgcluster), one per test process.
//
// The server is set up lazily by the first URL call of the test process. The
// migrations run once into a template database; every URL call then clones
// it with CREATE DATABASE ... TEMPLATE, which is much faster than migrating.
//
// Every test package with database tests must declare
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// so that the container or cluster stops when the tests end; URL fails the
// test when Main is not running.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgcluster"
	"bothy.example.com/bothy/migrations"
)

// EnvURL names the environment variable that points the harness at an
// existing PostgreSQL server.
const EnvURL = "BOTHY_TEST_DATABASE_URL"

// containerImage is the image of the Docker source; it matches the major
// version the project supports.
const containerImage = "postgres:15"

// server is the PostgreSQL server of this test process.
type server struct {
	url      string        // server-level URL: the administrative database
	admin    *pgxpool.Pool // connections to url, for CREATE/DROP DATABASE
	template string        // migrated template database to clone
	source   string        // where the server comes from, for messages
	stop     func()        // stops a container or cluster; nil for EnvURL

	mu        sync.Mutex
	finished  []string // test databases to drop (dropLater)
	templates []string // templates of NewTemplate, dropped by Main
}

var (
	mainRunning atomic.Bool
	setupOnce   sync.Once
	srv         *server
	errSetup    error
)

// Main runs the tests of a package, then stops the container or cluster
// started for them, if any, and exits with the tests' exit code. Use it as
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// in every test package that calls URL. The functions of after run once the
// tests ended, before the database stops (to remove what the package's
// tests shared, such as a binary built once).
func Main(m *testing.M, after ...func()) {
	mainRunning.Store(true)
	code := m.Run()
	mainRunning.Store(false)
	for _, f := range after {
		f()
	}
	if srv != nil {
		if err := srv.dropPending(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
		if err := srv.dropTemplates(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
		srv.admin.Close()
		if srv.stop != nil {
			srv.stop()
		}
	}
	os.Exit(code)
}

// URL creates a fresh database, a clone of the migrated template, drops it
// when the test and its subtests end (t.Cleanup), and returns its URL. On
// any failure it ends the test with t.Fatalf and a message naming what is
// missing; it never skips, so a machine without a database fails loudly.
func URL(t testing.TB) string {
	t.Helper()
	return URLFrom(t, "")
}

// URLFrom is URL with the clone made from template, a name NewTemplate
// returned; "" is the migrated template of URL.
func URLFrom(t testing.TB, template string) string {
	t.Helper()
	s, err := get()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	if template == "" {
		template = s.template
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name, err := s.clone(ctx, template)
	if err != nil {
		t.Fatalf("pgtest: create a test database on the %s: %v", s.source, err)
	}
	t.Cleanup(func() {
		if err := s.dropLater(name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	u, err := withDatabase(s.url, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// NewTemplate makes a template of this test process: a clone of the
// migrated template that fill fills through the URL it is given (and must
// leave without open connections), then frozen so that URLFrom clones it.
// A harness makes one for a fixture that many tests start from (the
// example world): building the fixture once and cloning it is much
// cheaper than building it for every test. The template is dropped when
// Main ends. Like URL it requires Main.
func NewTemplate(ctx context.Context, fill func(ctx context.Context, url string) error) (string, error) {
	s, err := get()
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	name, err := s.clone(ctx, s.template)
	if err != nil {
		return "", fmt.Errorf("pgtest: create a template on the %s: %w", s.source, err)
	}
	s.mu.Lock()
	s.templates = append(s.templates, name)
	s.mu.Unlock()
	u, err := withDatabase(s.url, name)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if err := fill(ctx, u); err != nil {
		return "", err
	}
	if err := settle(ctx, u); err != nil {
		return "", fmt.Errorf("pgtest: settle template: %w", err)
	}
	// No connections from now on: CREATE DATABASE ... TEMPLATE fails while
	// any session is connected to the template (exec waits for the fill's
	// closed sessions to go).
	for _, stmt := range []string{
		"ALTER DATABASE " + ident(name) + " WITH ALLOW_CONNECTIONS false",
		"ALTER DATABASE " + ident(name) + " WITH IS_TEMPLATE true",
	} {
		if err := s.exec(ctx, stmt); err != nil {
			return "", fmt.Errorf("pgtest: finish template: %w", err)
		}
	}
	return name, nil
}

// settle vacuums the filled template, freezing its rows and setting
// their hint bits and the planner's statistics, so that every clone starts
// with that work done once instead of doing it itself (the first read of
// each fresh row writes its page, and autovacuum visits every clone with
// the fill's dead rows).
func settle(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "VACUUM (FREEZE, ANALYZE)")
	return err
}

// dropTemplates drops the templates of NewTemplate (a template must stop
// being one before DROP DATABASE takes it).
func (s *server) dropTemplates() error {
	s.mu.Lock()
	names := s.templates
	s.templates = nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, name := range names {
		if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+ident(name)+" WITH IS_TEMPLATE false"); err != nil {
			errs = append(errs, fmt.Errorf("drop template %s: %w", name, err))
			continue
		}
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("drop template %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// ServerURL returns the URL of the test server's administrative database,
// setting the server up on first use, for tools that create databases of
// their own. Like URL it requires Main. The error says what is missing.
func ServerURL() (string, error) {
	s, err := get()
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	return s.url, nil
}

// get sets the server up once per process and returns it.
func get() (*server, error) {
	if !mainRunning.Load() {
		// Without Main nobody stops the container or cluster, and every
		// `go test` run would leave one behind.
		return nil, errors.New("the test package lacks `func TestMain(m *testing.M) { pgtest.Main(m) }`")
	}
	setupOnce.Do(func() {
		srv, errSetup = setup()
	})
	return srv, errSetup
}

// hint is appended to every setup error: it lists the ways to get a server.
const hint = "\nTo run database tests, set " + EnvURL + " to a PostgreSQL server URL " +
	"(e.g. postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable), " +
	"or start a Docker engine, or install the PostgreSQL server binaries (on Debian: apt-get install postgresql)"

func setup() (*server, error) {
	// Pulling the image on a cold machine is the slow case.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := startServer(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w%s", err, hint)
	}
	if err := s.init(ctx); err != nil {
		if s.stop != nil {
			s.stop()
		}
		return nil, fmt.Errorf("%s: %w", s.source, err)
	}
	return s, nil
}

func startServer(ctx context.Context) (*server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &server{url: u, source: "server of " + EnvURL}, nil
	}
	var dockerErr error
	if dockerAnswers() {
		s, err := startContainer(ctx)
		if err == nil {
			return s, nil
		}
		// Docker answers but cannot run the image (offline pull, no
		// permission...): the local binaries may still do.
		dockerErr = err
	}
	s, err := startCluster(ctx)
	if err != nil {
		if dockerErr != nil {
			return nil, fmt.Errorf("%w; and %w", dockerErr, err)
		}
		return nil, fmt.Errorf("no %s, no Docker engine, and %w", EnvURL, err)
	}
	return s, nil
}

// dockerAnswers reports whether a Docker engine answers within about two
// seconds. Asking testcontainers for its client honours its own discovery
// (DOCKER_HOST, ~/.testcontainers.properties, Docker contexts); a ping
// proves the daemon is there. Nothing else of testcontainers (notably the
// Ryuk reaper) starts unless this succeeds, so a machine without Docker
// never waits on it.
func dockerAnswers() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	answered := make(chan bool, 1)
	go func() {
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			answered <- false
			return
		}
		defer cli.Close()
		_, err = cli.Ping(ctx, client.PingOptions{})
		answered <- err == nil
	}()
	// Belt and braces: should discovery ignore ctx, do not wait for it.
	select {
	case ok := <-answered:
		return ok
	case <-time.After(3 * time.Second):
		return false
	}
}

func startContainer(ctx context.Context) (*server, error) {
	ctr, err := tcpostgres.Run(ctx, containerImage,
		tcpostgres.BasicWaitStrategies(),
		// Same durability trade as the local cluster: test data is
		// disposable (the module already sets fsync=off).
		testcontainers.WithCmdArgs(
			"-c", "synchronous_commit=off",
			"-c", "full_page_writes=off",
			"-c", "max_connections=200",
		),
	)
	stop := func() {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("start a %s container: %w", containerImage, err)
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		stop()
		return nil, fmt.Errorf("address of the %s container: %w", containerImage, err)
	}
	return &server{url: u, source: containerImage + " container", stop: stop}, nil
}

func startCluster(ctx context.Context) (*server, error) {
	dir, err := os.MkdirTemp("", "bothy-pgtest-")
	if err != nil {
		return nil, err
	}
	c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Ephemeral: true, NoSync: true})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &server{
		url:    c.URL("postgres"),
		source: "local PostgreSQL cluster in " + dir,
		stop:   func() { _ = c.Stop() },
	}, nil
}

// init connects the admin pool and makes sure the template exists.
func (s *server) init(ctx context.Context) error {
	pool, err := db.Open(ctx, db.Options{URL: s.url, MaxConns: 4})
	if err != nil {
		return err
	}
	s.admin = pool
	s.template = templateName()
	if err := s.ensureTemplate(ctx); err != nil {
		pool.Close()
		return err
	}
	return nil
}

// templateName is bothy_template_ followed by a digest of the embedded
// migrations. Test processes of one `go test` run (and of other checkouts)
// may share the server of EnvURL: those with the same migrations share the
// template, those with other migrations get their own, and a template is
// never migrated while another process clones it. Templates of old
// migration sets stay on a shared server until dropped by hand (ALTER
// DATABASE ... IS_TEMPLATE false, then DROP DATABASE).
func templateName() string {
	h := sha256.New()
	_ = fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := migrations.FS.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	return "bothy_template_" + hex.EncodeToString(h.Sum(nil))[:12]
}

// templateLockKey is the advisory lock key that serialises template builds
// among test processes sharing a server.
const templateLockKey = 0x626f746879 // "bothy"

// ensureTemplate creates and migrates the template unless it exists.
//
// The template is built under another name and renamed when complete, so
// its name appears only once it is fully migrated (a crashed build leaves a
// *_build_* database that the next build drops). It then refuses
// connections: CREATE DATABASE ... TEMPLATE fails while any session is
// connected to the template, and a template nobody can connect to never has
// one.
func (s *server) ensureTemplate(ctx context.Context) error {
	if ok, err := s.databaseExists(ctx, s.template); err != nil || ok {
		return err
	}
	conn, err := s.admin.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("lock template build: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLockKey)

	// Another process may have built it while this one waited.
	if ok, err := s.databaseExists(ctx, s.template); err != nil || ok {
		return err
	}
	if err := s.dropBuildLeftovers(ctx, conn); err != nil {
		return err
	}
	build := fmt.Sprintf("%s_build_%d", s.template, os.Getpid())
	if err := s.exec(ctx, "CREATE DATABASE "+ident(build)); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	buildURL, err := withDatabase(s.url, build)
	if err != nil {
		return err
	}
	if err := db.Migrate(ctx, buildURL); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	for _, stmt := range []string{
		"ALTER DATABASE " + ident(build) + " WITH ALLOW_CONNECTIONS false",
		"ALTER DATABASE " + ident(build) + " RENAME TO " + ident(s.template),
		"ALTER DATABASE " + ident(s.template) + " WITH IS_TEMPLATE true",
	} {
		if err := s.exec(ctx, stmt); err != nil {
			return fmt.Errorf("finish template: %w", err)
		}
	}
	return nil
}

// dropBuildLeftovers drops the template builds a crashed process left
// (their names start with the template's and _build_).
func (s *server) dropBuildLeftovers(ctx context.Context, conn *pgxpool.Conn) error {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", s.template+"_build_")
	if err != nil {
		return err
	}
	leftovers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, name := range leftovers {
		if err := s.exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			return err
		}
	}
	return nil
}

func (s *server) databaseExists(ctx context.Context, name string) (bool, error) {
	var ok bool
	err := s.admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&ok)
	return ok, err
}

// dropBatch is how many finished test databases wait to be dropped
// together. PostgreSQL checkpoints at every DROP DATABASE, writing out
// every dirty page of the server (those of the other tests' databases
// too): in a batch only the first drop has much to write. A batch bounds
// the disk the waiting databases take.
const dropBatch = 8

// dropLater queues the finished test database name and drops the queue
// once it holds dropBatch databases.
func (s *server) dropLater(name string) error {
	s.mu.Lock()
	s.finished = append(s.finished, name)
	full := len(s.finished) >= dropBatch
	s.mu.Unlock()
	if !full {
		return nil
	}
	return s.dropPending()
}

// dropPending drops every queued test database. FORCE ends the sessions a
// test left open (a pool not closed); without it the drop would fail and
// the database leak.
func (s *server) dropPending() error {
	s.mu.Lock()
	names := s.finished
	s.finished = nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, name := range names {
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("drop test database %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// clone creates a database t_<random> from template and returns its name.
func (s *server) clone(ctx context.Context, template string) (string, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	return name, s.exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE "+ident(template))
}

// exec runs a statement on the admin pool, retrying for a few seconds while
// the database involved is "being accessed by other users" (55006): a
// client that just disconnected (goose's connections after the migration)
// leaves a backend that takes a moment to exit.
func (s *server) exec(ctx context.Context, sql string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.admin.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ident quotes a database name for SQL.
func ident(name string) string {
	return pgx.Identifier{name}.Sanitize()
}

// withDatabase returns serverURL with its database replaced by name. Both
// forms libpq accepts are handled: postgres:// URLs and keyword=value
// strings.
func withDatabase(serverURL, name string) (string, error) {
	if strings.HasPrefix(serverURL, "postgres://") || strings.HasPrefix(serverURL, "postgresql://") {
		u, err := url.Parse(serverURL)
		if err != nil {
			return "", fmt.Errorf("%s is not a valid URL", EnvURL)
		}
		u.Path, u.RawPath = "/"+name, ""
		return u.String(), nil
	}
	// A later keyword overrides an earlier one.
	return serverURL + " dbname='" + name + "'", nil
}
