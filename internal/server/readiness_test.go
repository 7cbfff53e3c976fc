package server_test

import (
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// dbGate is a TCP forwarder in front of the test database for the LISTEN
// connection alone: closed, it takes new connections and hangs up at once,
// as a database that is restarting or cut off does, while the pool, which
// does not pass through it, keeps working.
type dbGate struct {
	ln      net.Listener
	network string
	target  string
	open    atomic.Bool
	wg      sync.WaitGroup
}

// newDBGate starts an open gate to the server of dbURL and returns it with
// the URL of the same database through the gate.
func newDBGate(t *testing.T, dbURL string) (*dbGate, string) {
	t.Helper()
	pc, err := pgconn.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	g := &dbGate{network: "tcp", target: net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))}
	if strings.HasPrefix(pc.Host, "/") {
		g.network, g.target = "unix", pc.Host+"/.s.PGSQL."+strconv.Itoa(int(pc.Port))
	}
	if g.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	g.open.Store(true)
	g.wg.Add(1)
	go g.accept()
	t.Cleanup(func() { g.ln.Close(); g.wg.Wait() })
	host, port, _ := net.SplitHostPort(g.ln.Addr().String())
	through := dbURL + " host=" + host + " port=" + port // a later keyword wins
	if u, err := url.Parse(dbURL); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = g.ln.Addr().String()
		through = u.String()
	}
	return g, through
}

func (g *dbGate) accept() {
	defer g.wg.Done()
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		if !g.open.Load() {
			c.Close()
			continue
		}
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer c.Close()
			up, err := net.Dial(g.network, g.target)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() { io.Copy(up, c); up.Close(); close(done) }()
			io.Copy(c, up)
			c.Close()
			<-done
		}()
	}
}

// TestReadinessFollowsTheListenerAtOnce: after an outage of the LISTEN
// connection long enough for its backoff to grow past a second, the first
// /readyz probe once the database takes connections again answers ready:
// the probe has the listener retry at once instead of after its pause.
func TestReadinessFollowsTheListenerAtOnce(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	gate, listenURL := newDBGate(t, dbURL)
	var logs apitest.Buffer
	env := apitest.Start(t, apitest.Options{DatabaseURL: dbURL, Logger: jsonLogger(&logs, slog.LevelInfo),
		Config: map[string]string{config.DatabaseListenURL: listenURL}})
	waitReady(t, env)

	// The database stops taking the listener's connections, and its LISTEN
	// session ends as a restart would end it.
	gate.open.Store(false)
	if n := env.Count(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND (query LIKE 'LISTEN %' OR query LIKE 'SELECT pg_current_snapshot()%')`); n != 1 {
		t.Fatalf("%d LISTEN sessions terminated, want 1", n)
	}
	// Wait until the listener has failed often enough to pause 1.6 s
	// (100 ms doubling) before its next attempt.
	const longPause = 1600
	deadline := time.Now().Add(30 * time.Second)
	for !listenerPausing(t, &logs, longPause) {
		if time.Now().After(deadline) {
			t.Fatalf("the listener never paused %d ms:\n%s", longPause, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := env.Metric("bothy_listener_connected"); got != 0 {
		t.Fatalf("bothy_listener_connected %v while the gate is closed", got)
	}

	// The database is back: the very next probe answers ready, although
	// the listener's own pause has more than a second to run.
	gate.open.Store(true)
	start := time.Now()
	if got := readyReason(t, env); got != "" {
		t.Fatalf("first probe after the database came back: reason %q, want ready", got)
	}
	t.Logf("ready %v after the database came back", time.Since(start))
	if got := env.Metric("bothy_listener_connected"); got != 1 {
		t.Fatalf("bothy_listener_connected %v after a ready probe", got)
	}

	// Wake-ups run through the new connection.
	wantLongPollWoken(t, env, "after-listener-outage")
}

// listenerPausing reports whether the listener logged a pause of at least
// ms milliseconds before its next attempt.
func listenerPausing(t *testing.T, logs *apitest.Buffer, ms float64) bool {
	t.Helper()
	for _, l := range logs.Lines(t) {
		if l["msg"] == "agent event listener lost its connection" {
			if pause, _ := l["retry_in_ms"].(float64); pause >= ms {
				return true
			}
		}
	}
	return false
}
