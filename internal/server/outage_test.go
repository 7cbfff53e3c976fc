package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgcluster"
)

func countMsg(msgs []string, prefix string) int {
	n := 0
	for _, m := range msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// stopCluster stops the cluster and returns once nothing answers on its
// port any more: a restart on the same data folder and port before the old
// server is gone would meet it shutting down.
func stopCluster(t *testing.T, c *pgcluster.Cluster, port int) {
	t.Helper()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL still answers on port %d after its stop", port)
		}
		time.Sleep(10 * time.Millisecond) // the poll's pace, not a wait that decides
	}
}

// outageCluster starts a durable cluster of the test's own (to stop and
// start again), with a migrated database bothy, and returns it with its
// data folder, port and the database's URL.
func outageCluster(t *testing.T, ctx context.Context) (*pgcluster.Cluster, string, int, string) {
	t.Helper()
	dir := t.TempDir()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop() })
	admin, err := pgx.Connect(ctx, cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE bothy"); err != nil {
		t.Fatal(err)
	}
	admin.Close(ctx)
	url := cluster.URL("bothy")
	if err := db.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	return cluster, dir, cluster.Port(), url
}

// testDatabaseOutage stops the server's PostgreSQL under a bounded write
// load and starts it again: clients get 503 unavailable with Retry-After
// (never 500), writes succeed again without restarting Bothy, every
// acknowledged message is stored, and the log has one line for the start
// of the outage and one for its end.
func testDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, dir, port, url := outageCluster(t, ctx)
	logs := &apitest.Buffer{}
	env := apitest.Start(t, apitest.Options{DatabaseURL: url, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Config: map[string]string{"ratelimit.rl.message.burst": "100000", "ratelimit.rl.message.per_minute": "100000"}})
	main := env.Main("Support/Allgemein")

	load := startOutageLoad(t, env, main, 3)
	load.waitUntil(t, "writes before the outage", func() bool { return load.statuses[http.StatusCreated] >= 10 })
	stopCluster(t, cluster, port)
	// Every writer has met the outage more than once.
	load.waitUntil(t, "503 answers during the outage", func() bool { return load.statuses[http.StatusServiceUnavailable] >= 6 })

	// GraphQL answers 503 as well while the database is away.
	res := env.GraphQL(env.World.Token("alex"), `{ thread(id: "`+main+`") { id } }`, nil, nil)
	if res.Status != http.StatusServiceUnavailable || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "unavailable" ||
		res.Header.Get("Retry-After") == "" || res.Errors[0].Extensions.RetryAfterSeconds <= 0 {
		t.Errorf("GraphQL during the outage: %d %+v %v", res.Status, res.Errors, res.Header)
	}

	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	// The cleanup also keeps the cluster reachable: a Cluster the garbage
	// collector takes closes its watchdog's pipe, which stops the server.
	t.Cleanup(func() { cluster.Stop() })
	load.mu.Lock()
	load.restarted = time.Now()
	load.mu.Unlock()
	load.waitUntil(t, "a write after the restart", func() bool { return load.recovered > 0 })
	load.mu.Lock()
	after := load.statuses[http.StatusCreated] + 10
	load.mu.Unlock()
	load.waitUntil(t, "writes after the recovery", func() bool { return load.statuses[http.StatusCreated] >= after })
	load.end()

	load.wantAnswered(t)
	wantAllStored(t, ctx, url, load.acked)
	// The end of the outage is logged by the watcher within a second or two.
	msgs := wantOneOutage(t, logs, 5*time.Second)
	if n := countMsg(msgs, "internal error"); n > 0 {
		t.Errorf("%d internal error lines during the outage", n)
	}
}

// outageLoad is the bounded write load of testDatabaseOutage: writers that
// post into one thread until ended, and what they were answered.
type outageLoad struct {
	mu        sync.Mutex
	acked     []string
	statuses  map[int]int
	retryHdr  bool
	restarted time.Time
	recovered time.Duration

	stop chan struct{}
	// answered is signalled after every answer a writer counted; the test
	// waits on it for the progress it needs instead of for fixed times.
	answered chan struct{}
	wg       sync.WaitGroup
}

// startOutageLoad starts writers that post as alex into thread.
func startOutageLoad(t *testing.T, env *apitest.Env, thread string, writers int) *outageLoad {
	l := &outageLoad{statuses: map[int]int{}, retryHdr: true, stop: make(chan struct{}), answered: make(chan struct{}, 1)}
	for w := range writers {
		l.wg.Add(1)
		go l.write(t, env, thread, w)
	}
	return l
}

// write is writer w: it posts until the load ends, at its own pace.
func (l *outageLoad) write(t *testing.T, env *apitest.Env, thread string, w int) {
	defer l.wg.Done()
	for i := 0; ; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		r, err := env.PostDo("alex", thread, fmt.Sprintf("w%d-%d", w, i), "load")
		if err != nil {
			t.Error(err)
			return
		}
		l.record(r)
		select {
		case l.answered <- struct{}{}:
		default:
		}
		time.Sleep(20 * time.Millisecond) // the writers' pace, not a wait
	}
}

// record counts the answer r: an acknowledged message, the first write
// after the restart, whether every 503 has Retry-After and its code.
func (l *outageLoad) record(r *apitest.Response) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses[r.Status]++
	switch r.Status {
	case http.StatusCreated:
		var m struct {
			ID string `json:"id"`
		}
		json.Unmarshal(r.Body, &m)
		l.acked = append(l.acked, m.ID)
		if !l.restarted.IsZero() && l.recovered == 0 {
			l.recovered = time.Since(l.restarted)
		}
	case http.StatusServiceUnavailable:
		var p apitest.Problem
		json.Unmarshal(r.Body, &p)
		l.retryHdr = l.retryHdr && r.Header.Get("Retry-After") != "" && p.Code == "unavailable"
	}
}

// waitUntil waits up to 30 s for cond, checked with l.mu held after every
// answer.
func (l *outageLoad) waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		ok := cond()
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-l.answered:
		case <-timeout:
			l.mu.Lock()
			statuses := fmt.Sprint(l.statuses)
			l.mu.Unlock()
			t.Fatalf("waited 30s for %s: statuses %s", what, statuses)
		}
	}
}

// end stops the writers and waits for them.
func (l *outageLoad) end() {
	close(l.stop)
	l.wg.Wait()
}

// wantAnswered checks the answers of the ended load: only 201 and 503,
// some 503 and all of them with Retry-After and code unavailable, and a
// write that succeeded after the restart.
func (l *outageLoad) wantAnswered(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("statuses %v, acknowledged %d, recovery after restart %v", l.statuses, len(l.acked), l.recovered)
	if l.recovered == 0 {
		t.Fatal("no write succeeded within 30s of the restart")
	}
	for st := range l.statuses {
		if st != http.StatusCreated && st != http.StatusServiceUnavailable {
			t.Errorf("status %d seen %d times", st, l.statuses[st])
		}
	}
	if l.statuses[http.StatusServiceUnavailable] == 0 || !l.retryHdr {
		t.Errorf("503 answers %d, all with Retry-After and code unavailable: %v", l.statuses[http.StatusServiceUnavailable], l.retryHdr)
	}
}

// wantAllStored checks that every acknowledged message is stored in the
// database at url.
func wantAllStored(t *testing.T, ctx context.Context, url string, acked []string) {
	t.Helper()
	// A fresh connection: the pool may still hold one the restart ended.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var stored int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM messages WHERE id = ANY($1::uuid[])`, acked).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != len(acked) {
		t.Errorf("lost writes: %d acknowledged, %d stored", len(acked), stored)
	}
}

// wantOneOutage waits up to within for the log line of an outage's end and
// checks that logs hold one outage: one line at its start, one at its end.
// It returns the messages logged.
func wantOneOutage(t *testing.T, logs *apitest.Buffer, within time.Duration) []string {
	t.Helper()
	var msgs []string
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if msgs = logMessages(t, logs); countMsg(msgs, "database outage ended") > 0 {
			break
		}
	}
	if s, e := countMsg(msgs, "database outage started"), countMsg(msgs, "database outage ended"); s != 1 || e != 1 {
		t.Errorf("outage log lines: %d started, %d ended; want 1 and 1", s, e)
		for _, l := range logs.Lines(t) {
			if msg, _ := l["msg"].(string); strings.Contains(msg, "outage") {
				t.Logf("%v %s error=%v", l["time"], msg, l["error"])
			}
		}
	}
	return msgs
}

// logMessages returns the msg of every JSON log line written to b.
func logMessages(t *testing.T, b *apitest.Buffer) []string {
	t.Helper()
	var out []string
	for _, l := range b.Lines(t) {
		msg, _ := l["msg"].(string)
		out = append(out, msg)
	}
	return out
}

// testOutageIsTemporaryOnWebSockets: while the database is away, a new
// WebSocket connection closes 1013 (try again later), not 4403, and an
// open subscription is never completed; after the restart a subscription
// (the same, or one reopened from the last cursor received) delivers the
// next event, and nothing is lost or repeated.
func testOutageIsTemporaryOnWebSockets(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, dir, port, url := outageCluster(t, ctx)
	env := apitest.Start(t, apitest.Options{DatabaseURL: url, Config: map[string]string{config.DatabaseListenBackoffMax: "100ms"}})
	alex := env.World.Token("alex")
	main := env.Main("Support/Allgemein")
	const query = `subscription($a: String) { events(after: $a) { seq type } }`
	open := func(after string) *rawWS {
		w := dialRaw(t, env, nil)
		w.init(alex)
		w.send(subscribeAfter("s", query, after))
		return w
	}
	sub := open(logEnd(env))
	env.MustPost("alex", main, "out-1", "before the outage")
	var last string
	for {
		m := sub.want("next")
		last = nextSeq(m)
		if strings.Contains(string(m.Payload), "message.created") {
			break
		}
	}

	stopCluster(t, cluster, port)
	w := dialRaw(t, env, nil)
	w.send(rawMsg{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + alex + `"}`)})
	if _, code := w.read(10 * time.Second); code != 1013 {
		t.Fatalf("a connection during the outage closed with %d, want 1013", code)
	}

	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop() })
	waitReady(t, env)
	env.MustPost("alex", main, "out-2", "after the outage")
	// The open subscription either delivers, or it was closed 1013 and is
	// reopened from the last cursor received; never a complete or an error.
	// The post after the outage is the only message.created to come.
	var got []string
	for len(got) == 0 || !strings.Contains(got[len(got)-1], "message.created") {
		m, code := sub.read(10 * time.Second)
		switch {
		case code == 1013:
			sub = open(last)
			continue
		case code != 0 || m.Type != "next":
			t.Fatalf("the subscription got %+v (close %d) across the outage", m, code)
		}
		if seq := nextSeq(m); seqNum(seq) <= seqNum(last) {
			t.Fatalf("event %s repeated (last %s)", seq, last)
		}
		last = nextSeq(m)
		got = append(got, string(m.Payload))
	}
}

// TestDatabaseOutage runs the database outage cases, each on a cluster of its own.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	t.Run("REST and GraphQL", testDatabaseOutage)
	t.Run("WebSockets", testOutageIsTemporaryOnWebSockets)
}
