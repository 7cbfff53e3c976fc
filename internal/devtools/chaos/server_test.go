//go:build chaos

package chaos

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/internal/server"
	"bothy.example.com/bothy/internal/world"
)

// TestMain stops the test database's cluster or container after the tests.
func TestMain(m *testing.M) { pgtest.Main(m) }

// bothy is the server under test: served on 127.0.0.1, on a fresh test
// database with the example world.
type bothy struct {
	URL   string
	Pool  *pgxpool.Pool
	World *world.World
}

// startBothy assembles and serves Bothy for t with the configuration keys
// of cfg changed, logging JSON to logDir/server.log. It stops without the
// drain delay (server.drain_delay 0s), which nothing here tests.
//
// It does not use apitest.Start: the module harness under it runs the
// modules on a fake clock, which moves only when a test advances it, while
// here leases must lapse and the sweeper must act in real time, between
// processes that know nothing of a fake clock (an adapter renews every
// third of the lease by its own wall clock). server.New takes the clock as
// a dependency, so the same assembly runs on clock.Real without a change
// to another package.
func startBothy(t *testing.T, logDir string, cfg map[string]string) *bothy {
	t.Helper()
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	c, err := config.Defaults().With(config.ServerDrainDelay, "0s")
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range cfg {
		var err error
		if c, err = c.With(k, v); err != nil {
			t.Fatalf("chaos config: %v", err)
		}
	}
	pool, err := db.Open(ctx, db.Options{URL: dbURL, MaxConns: c.Int(config.DatabaseMaxConns)})
	if err != nil {
		t.Fatalf("open the test database: %v", err)
	}
	t.Cleanup(pool.Close)
	logFile, err := os.Create(filepath.Join(logDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	log := slog.New(slog.NewJSONHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := server.New(server.Deps{Config: c, Pool: pool, DatabaseURL: dbURL, Clock: clock.Real{}, Logger: log})
	if err != nil {
		t.Fatalf("assemble the server: %v", err)
	}
	w, err := world.Build(ctx, world.Of(srv.Modules()))
	if err != nil {
		t.Fatalf("build the example world: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = srv.Serve(sctx, ln) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &bothy{URL: "http://" + ln.Addr().String(), Pool: pool, World: w}
}
