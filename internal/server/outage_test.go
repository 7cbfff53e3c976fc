package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/apitest"
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

// TestDatabaseOutage stops the server's PostgreSQL under a bounded write
// load and starts it again: clients get 503 unavailable with Retry-After
// (never 500), writes succeed again without restarting Bothy, every
// acknowledged message is stored, and the log has one line for the start
// of the outage and one for its end.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	port := cluster.Port()
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
	logs := &apitest.Buffer{}
	env := apitest.Start(t, apitest.Options{DatabaseURL: url, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Config: map[string]string{"ratelimit.rl.message.burst": "100000", "ratelimit.rl.message.per_minute": "100000"}})
	main := env.Main("Support/Allgemein")

	var (
		mu        sync.Mutex
		acked     []string
		statuses  = map[int]int{}
		retryHdr  = true
		restarted time.Time
		recovered time.Duration
	)
	stop := make(chan struct{})
	// answered is signalled after every answer a writer counted; the test
	// waits on it for the progress it needs instead of for fixed times.
	answered := make(chan struct{}, 1)
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
			select {
			case <-answered:
			case <-timeout:
				t.Fatalf("waited 30s for %s: statuses %v", what, statuses)
			}
		}
	}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := env.PostDo("alex", main, fmt.Sprintf("w%d-%d", w, i), "load")
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				statuses[r.Status]++
				switch r.Status {
				case http.StatusCreated:
					var m struct {
						ID string `json:"id"`
					}
					json.Unmarshal(r.Body, &m)
					acked = append(acked, m.ID)
					if !restarted.IsZero() && recovered == 0 {
						recovered = time.Since(restarted)
					}
				case http.StatusServiceUnavailable:
					var p apitest.Problem
					json.Unmarshal(r.Body, &p)
					retryHdr = retryHdr && r.Header.Get("Retry-After") != "" && p.Code == "unavailable"
				}
				mu.Unlock()
				select {
				case answered <- struct{}{}:
				default:
				}
				time.Sleep(20 * time.Millisecond) // the writers' pace, not a wait
			}
		}()
	}
	waitUntil("writes before the outage", func() bool { return statuses[http.StatusCreated] >= 10 })
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	// Every writer has met the outage more than once.
	waitUntil("503 answers during the outage", func() bool { return statuses[http.StatusServiceUnavailable] >= 6 })

	// GraphQL answers 503 as well while the database is away.
	res := env.GraphQL(env.World.Token("alex"), `{ thread(id: "`+main+`") { id } }`, nil, nil)
	if res.Status != http.StatusServiceUnavailable || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "unavailable" ||
		res.Header.Get("Retry-After") == "" || res.Errors[0].Extensions.RetryAfterSeconds <= 0 {
		t.Errorf("GraphQL during the outage: %d %+v %v", res.Status, res.Errors, res.Header)
	}

	cluster, err = pgcluster.Start(ctx, pgcluster.Options{DataDir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	restarted = time.Now()
	mu.Unlock()
	waitUntil("a write after the restart", func() bool { return recovered > 0 })
	mu.Lock()
	after := statuses[http.StatusCreated] + 10
	mu.Unlock()
	waitUntil("writes after the recovery", func() bool { return statuses[http.StatusCreated] >= after })
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("statuses %v, acknowledged %d, recovery after restart %v", statuses, len(acked), recovered)
	if recovered == 0 {
		t.Fatal("no write succeeded within 30s of the restart")
	}
	for st := range statuses {
		if st != http.StatusCreated && st != http.StatusServiceUnavailable {
			t.Errorf("status %d seen %d times", st, statuses[st])
		}
	}
	if statuses[http.StatusServiceUnavailable] == 0 || !retryHdr {
		t.Errorf("503 answers %d, all with Retry-After and code unavailable: %v", statuses[http.StatusServiceUnavailable], retryHdr)
	}
	stored := env.Count(`SELECT count(*) FROM messages WHERE id = ANY($1::uuid[])`, acked)
	if stored != len(acked) {
		t.Errorf("lost writes: %d acknowledged, %d stored", len(acked), stored)
	}
	// The end of the outage is logged by the watcher within a second or two.
	var msgs []string
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if msgs = logMessages(t, logs); countMsg(msgs, "database outage ended") > 0 {
			break
		}
	}
	if s, e := countMsg(msgs, "database outage started"), countMsg(msgs, "database outage ended"); s != 1 || e != 1 {
		t.Errorf("outage log lines: %d started, %d ended; want 1 and 1", s, e)
	}
	if n := countMsg(msgs, "internal error"); n > 0 {
		t.Errorf("%d internal error lines during the outage", n)
	}
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
