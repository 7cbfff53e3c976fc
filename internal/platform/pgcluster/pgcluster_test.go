package pgcluster

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// requireBinaries fails (never skips) when the server binaries are missing:
// a skipped test would hide that the machine cannot run the dev database.
func requireBinaries(t *testing.T) {
	t.Helper()
	if _, err := FindBinaries(); err != nil {
		t.Fatal(err)
	}
}

// TestStartKeepsDataAcrossRestarts covers one life of a dev database: one
// initdb (the slow part, so the test runs it only once), a restart over a
// stale postmaster.pid, and the data still there.
func TestStartKeepsDataAcrossRestarts(t *testing.T) {
	requireBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()

	c := startCluster(ctx, t, dir)
	conn := connect(ctx, t, c)
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	// A kept cluster (bothy dev) is durable: a confirmed commit survives
	// a crash of the database.
	for _, setting := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(ctx, "SHOW "+setting).Scan(&v); err != nil || v != "on" {
			t.Fatalf("%s = %q, %v; want on", setting, v, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	pidFile := filepath.Join(dir, "pgdata", "postmaster.pid")
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Fatalf("postmaster.pid after Stop: %v", err)
	}
	// A crashed server leaves its postmaster.pid behind; the next start
	// must see that the pid is dead (pids stay below 2^22 on Linux).
	if err := os.WriteFile(pidFile, []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	c = startCluster(ctx, t, dir)
	conn = connect(ctx, t, c)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "still here" {
		t.Fatalf("row after restart = %q, %v", v, err)
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestDurabilitySettings: only a NoSync cluster turns durability off.
func TestDurabilitySettings(t *testing.T) {
	durable := (&Cluster{}).durability()
	fast := (&Cluster{noSync: true}).durability()
	want := map[bool][]string{
		false: {"-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "full_page_writes=on"},
		true:  {"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"},
	}
	if !slices.Equal(durable, want[false]) || !slices.Equal(fast, want[true]) {
		t.Fatalf("durable %v, no-sync %v", durable, fast)
	}
}

func TestURL(t *testing.T) {
	c := &Cluster{port: 54321}
	u, err := url.Parse(c.URL("my db"))
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "postgres" || u.User.Username() != "postgres" || u.Host != "127.0.0.1:54321" ||
		u.Path != "/my db" || u.Query().Get("sslmode") != "disable" {
		t.Fatalf("URL = %s", u)
	}
}

func TestCompareVersions(t *testing.T) {
	if compareVersions("9.6", "10") >= 0 || compareVersions("15", "14") <= 0 || compareVersions("16", "16") != 0 {
		t.Fatal("compareVersions orders versions wrongly")
	}
}

func startCluster(ctx context.Context, t *testing.T, dir string) *Cluster {
	t.Helper()
	c, err := Start(ctx, Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Stop is idempotent, so this only matters when the test fails early.
	t.Cleanup(func() { _ = c.Stop() })
	if c.Port() == 0 {
		t.Fatal("Port() = 0 after Start")
	}
	return c
}

func connect(ctx context.Context, t *testing.T, c *Cluster) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}
