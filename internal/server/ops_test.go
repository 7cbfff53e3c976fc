package server_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
)

func jsonLogger(b *apitest.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: level}))
}

// get answers a plain GET (operational endpoints are outside the OpenAPI
// document).
func get(t *testing.T, url string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

// waitReady polls /readyz until it answers 200.
func waitReady(t *testing.T, env *apitest.Env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body := get(t, env.URL+"/readyz", nil)
		if status == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never ready: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyReason probes /readyz and returns the reason of a 503 ("" for 200),
// checking the answer against the Problem schema.
func readyReason(t *testing.T, env *apitest.Env) string {
	t.Helper()
	r := env.REST(http.MethodGet, "/readyz", "", nil)
	if r.Status == http.StatusOK {
		return ""
	}
	p := r.Problem(t)
	if r.Status != http.StatusServiceUnavailable || p.Code != "unavailable" {
		t.Fatalf("/readyz answered %d %s", r.Status, r.Body)
	}
	return p.Reason
}

// TestReadinessBurstStaysInsidePool: 400 concurrent probes all answer 200
// and never hold more database sessions than the pool plus the listener.
func TestReadinessBurstStaysInsidePool(t *testing.T) {
	t.Parallel()
	const poolSize = 4
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.DatabaseMaxConns: fmt.Sprint(poolSize)}})
	waitReady(t, env)
	watch, err := pgx.Connect(t.Context(), env.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(t.Context())
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var n int64
			if err := watch.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n); err == nil && n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 400}, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstFailure atomic.Value
	start := make(chan struct{})
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.Get(env.URL + "/readyz")
			if err != nil {
				failed.Add(1)
				firstFailure.CompareAndSwap(nil, err.Error())
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				failed.Add(1)
				firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", resp.StatusCode, body))
			}
		}()
	}
	close(start)
	wg.Wait()
	close(stop)
	<-sampled
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d of 400 probes failed, first: %v", n, firstFailure.Load())
	}
	// The pool plus the one LISTEN connection.
	if p := peak.Load(); p > poolSize+1 || p == 0 {
		t.Fatalf("peak of %d database sessions during the burst, want at most %d", p, poolSize+1)
	}
}

// TestReadinessReasons: each cause of unreadiness answers 503 with its own
// reason, and the server is ready again once the cause is gone.
func TestReadinessReasons(t *testing.T) {
	t.Parallel()
	t.Run("migrations_pending", testReadinessMigrationsPending)
	t.Run("schema_newer", testReadinessSchemaNewer)
	t.Run("listener_down", testReadinessListenerDown)
	t.Run("listener reconnects", testReadinessListenerReconnects)
	t.Run("database_unreachable", testReadinessDatabaseUnreachable)
}

// testReadinessMigrationsPending: a schema one migration behind what the
// binary needs answers migrations_pending until the migration is applied.
func testReadinessMigrationsPending(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	var newest int64
	if err := env.Pool.QueryRow(t.Context(), `SELECT max(version_id) FROM goose_db_version`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	// The schema one migration behind what the binary needs.
	env.Exec(`UPDATE goose_db_version SET is_applied = false WHERE version_id = $1`, newest)
	if got := readyReason(t, env); got != "migrations_pending" {
		t.Fatalf("reason %q, want migrations_pending", got)
	}
	env.Exec(`UPDATE goose_db_version SET is_applied = true WHERE version_id = $1`, newest)
	waitReady(t, env)
	if got := env.Server.SchemaVersion(); got != newest {
		t.Fatalf("cached schema version %d, want %d", got, newest)
	}
}

// testReadinessSchemaNewer: a newer binary's contract step answers
// schema_newer; recorded as an expand step, the server is ready on it.
func testReadinessSchemaNewer(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	var newest int64
	if err := env.Pool.QueryRow(t.Context(), `SELECT max(version_id) FROM goose_db_version`).Scan(&newest); err != nil {
		t.Fatal(err)
	}
	// A newer binary applied migration 99, a contract step: this
	// binary refuses to serve.
	env.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99, true)`)
	env.Exec(`INSERT INTO schema_compat (version, requires) VALUES (99, 99)`)
	if got := readyReason(t, env); got != "schema_newer" {
		t.Fatalf("reason %q, want schema_newer", got)
	}
	// Recorded as an expand step that binaries of this one's newest
	// migration serve: ready, on schema 99.
	env.Exec(`UPDATE schema_compat SET requires = $1 WHERE version = 99`, newest)
	waitReady(t, env)
	if got := env.Server.SchemaVersion(); got != 99 {
		t.Fatalf("cached schema version %d, want 99", got)
	}
}

// testReadinessListenerDown: a LISTEN connection that cannot connect answers
// listener_down, while the listener retries.
func testReadinessListenerDown(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.DatabaseListenURL: "postgres://bothy@127.0.0.1:1/bothy?connect_timeout=1", config.DatabaseListenBackoffMax: "100ms"}})
	deadline := time.Now().Add(5 * time.Second)
	for env.Metric("bothy_listener_reconnects_total") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the listener does not retry")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := readyReason(t, env); got != "listener_down" {
		t.Fatalf("reason %q, want listener_down", got)
	}
	if v := env.Metric("bothy_listener_connected"); v != 0 {
		t.Fatalf("bothy_listener_connected %v with a dead listen URL", v)
	}
}

// testReadinessListenerReconnects: a killed LISTEN session reconnects, and
// wake-ups work through the new connection.
func testReadinessListenerReconnects(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	waitReady(t, env)
	// Kill the LISTEN session as a database restart or a network cut would.
	if n := env.Count(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND (query LIKE 'LISTEN %' OR query LIKE 'SELECT pg_current_snapshot()%')`); n != 1 {
		t.Fatalf("%d LISTEN sessions terminated, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for env.Metric("bothy_listener_reconnects_total") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the listener did not reconnect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitReady(t, env)
	// Wake-ups work through the new connection.
	wantLongPollWoken(t, env, "after-reconnect")
}

// testReadinessDatabaseUnreachable: a closed pool answers database_unreachable
// within the readiness timeout.
func testReadinessDatabaseUnreachable(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.ServerReadinessTimeout: "500ms"}})
	waitReady(t, env)
	if v := env.Metric("bothy_listener_connected"); v != 1 {
		t.Fatalf("bothy_listener_connected %v while ready", v)
	}
	env.Pool.Close()
	start := time.Now()
	if got := readyReason(t, env); got != "database_unreachable" {
		t.Fatalf("reason %q, want database_unreachable", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the probe took %s", d)
	}
}

// metricsText returns the whole /metrics answer of base.
func metricsText(t *testing.T, base string) string {
	t.Helper()
	status, _, body := get(t, base+"/metrics", nil)
	if status != http.StatusOK {
		t.Fatalf("/metrics = %d", status)
	}
	return string(body)
}

// promtoolCheck runs `promtool check metrics` on the exposition text.
func promtoolCheck(t *testing.T, text string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: install the Debian package prometheus (.ci/run does) to check the metrics exposition")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestMetricsByOperationAndCode: requests count by face, operation and
// outcome code (GraphQL errors by their code, not as 200), long polls count
// apart, the operational gauges and counters are exported, and promtool
// accepts the exposition.
func TestMetricsByOperationAndCode(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.RateReadBurst: "3", config.RateReadPerMinute: "1", config.DatabaseMaxConns: "7"}})
	waitReady(t, env)
	alex := env.World.Token("alex")
	if r := env.REST(http.MethodGet, "/api/v1/me", alex, nil); r.Status != http.StatusOK {
		t.Fatalf("getViewer %d", r.Status)
	}
	missing := "00000000-0000-4000-8000-000000000000"
	res := env.GraphQL(alex, `query LookAtMessage($id: ID!) { message(id: $id) { id } }`, map[string]any{"id": missing}, nil)
	if len(res.Errors) == 0 || res.Errors[0].Extensions.Code != "not_found" {
		t.Fatalf("missing message: %+v", res.Errors)
	}
	// The read bucket holds 3: the fourth read is refused.
	env.GraphQL(alex, `query Me { viewer { id } }`, nil, nil)
	if res := env.GraphQL(alex, `query Me { viewer { id } }`, nil, nil); len(res.Errors) == 0 || res.Errors[0].Extensions.Code != "rate_limited" {
		t.Fatalf("fourth read not limited: %+v", res.Errors)
	}
	env.GraphQL("", `query Me { viewer { id } }`, nil, nil)
	// A waiting long poll shows in the gauge while it waits.
	_, cursor := env.Poll(t, "lotse", "", 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := env.PollDo("lotse", cursor, 2); err != nil {
			t.Error(err)
		}
	}()
	// The request is counted before it parks: once it waits, the gauge
	// must show it.
	env.AwaitPolls(t, 1)
	if v := env.Metric("bothy_long_polls_waiting"); v != 1 {
		t.Fatalf("bothy_long_polls_waiting %v during a long poll, want 1", v)
	}
	<-done

	want := map[string]float64{
		`bothy_operations_total{code="ok",face="rest",operation="getViewer"}`:               1,
		`bothy_operations_total{code="not_found",face="graphql",operation="LookAtMessage"}`: 1,
		`bothy_operations_total{code="ok",face="graphql",operation="Me"}`:                   1,
		`bothy_operations_total{code="rate_limited",face="graphql",operation="Me"}`:         1,
		`bothy_operations_total{code="unauthorized",face="graphql",operation="none"}`:       1,
		`bothy_operations_total{code="ok",face="graphql",operation="anonymous"}`:            2,
		`bothy_ratelimit_rejections_total{class="rl.read"}`:                                 1,
		`bothy_long_polls_total{code="ok"}`:                                                 2,
		`bothy_long_poll_duration_seconds_count`:                                            2,
		`bothy_long_polls_waiting`:                                                          0,
		`bothy_operation_duration_seconds_count{face="graphql",operation="LookAtMessage"}`:  1,
		`bothy_operation_duration_seconds_count{face="graphql",operation="anonymous"}`:      0,
		`bothy_db_pool_max_connections`:                                                     7,
		`bothy_listener_connected`:                                                          1,
		`bothy_runs{state="queued"}`:                                                        0,
		`bothy_events_appended_total{stream="agent"}`:                                       0,
		`bothy_run_timeouts_total`:                                                          0,
	}
	text := metricsText(t, env.URL)
	for series, v := range want {
		if got := env.Metric(series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
	if !strings.Contains(text, `bothy_build_info{goversion="go`) || !strings.Contains(text, "bothy_db_pool_acquired_connections ") {
		t.Errorf("build info or pool gauges missing:\n%s", text)
	}
	promtoolCheck(t, text)
}

// TestMetricsOwnListener: with metrics.addr, /metrics leaves the API port.
func TestMetricsOwnListener(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{config.MetricsAddr: "127.0.0.1:0"}})
	metricsBase(t, env)
	if status, _, _ := get(t, env.URL+"/metrics", nil); status != http.StatusNotFound {
		t.Fatalf("/metrics on the API port = %d, want 404", status)
	}
	text := metricsText(t, "http://"+env.Server.MetricsAddr())
	if !strings.Contains(text, "bothy_build_info") {
		t.Fatalf("the metrics listener serves no bothy metrics")
	}
	// Every family of docs/operations.md's table is exported before any
	// request reached the server, at zero where nothing happened yet.
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	families := 0
	for _, row := range regexp.MustCompile("(?m)^\\| (`bothy_[^|]*)\\|").FindAllStringSubmatch(string(doc), -1) {
		for _, m := range regexp.MustCompile("`(bothy_[a-z_]+[a-z])[`{]").FindAllStringSubmatch(row[1], -1) {
			families++
			if !strings.Contains(text, "# TYPE "+m[1]+" ") {
				t.Errorf("%s is documented but not exported on a fresh server", m[1])
			}
		}
	}
	if families < 15 {
		t.Fatalf("%d documented metric families found; the table of docs/operations.md moved?", families)
	}
	promtoolCheck(t, text)
}

// TestAccessLog: one JSON line per request with operation, outcome code and
// client address; X-Forwarded-For counts only from a trusted proxy; probes
// are logged at debug, so an info logger leaves them out.
func TestAccessLog(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, proxies, wantClient string
	}{
		{"untrusted peer", "", "127.0.0.1"},
		{"trusted proxy", "127.0.0.1/32", "203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf apitest.Buffer
			env := apitest.Start(t, apitest.Options{Logger: jsonLogger(&buf, slog.LevelInfo),
				Config: map[string]string{config.HTTPTrustedProxies: tc.proxies}})
			waitReady(t, env)
			r := env.RESTWith(http.MethodGet, "/api/v1/me", env.World.Token("alex"), nil, http.Header{"X-Forwarded-For": {"203.0.113.9"}})
			if r.Status != http.StatusOK {
				t.Fatalf("getViewer %d", r.Status)
			}
			var seen bool
			for _, l := range buf.Lines(t) {
				if l["msg"] != "request" {
					continue
				}
				if l["face"] == "ops" {
					t.Fatalf("probe logged at info: %v", l)
				}
				if l["operation"] == "getViewer" {
					seen = true
					if l["client"] != tc.wantClient || l["code"] != "ok" || l["status"] != float64(200) || l["principal_id"] == "" || l["action"] != "viewer.read" {
						t.Fatalf("access line %v", l)
					}
				}
			}
			if !seen {
				t.Fatal("no access line for getViewer")
			}
		})
	}
}

// TestRunTimeoutLoggedAndCounted: the sweeper's timeouts make one log line
// each (ids only) and count in bothy_run_timeouts_total.
func TestRunTimeoutLoggedAndCounted(t *testing.T) {
	t.Parallel()
	var buf apitest.Buffer
	env := apitest.Start(t, apitest.Options{Logger: jsonLogger(&buf, slog.LevelInfo),
		Config: map[string]string{config.RunSweepInterval: "100ms"}})
	env.MustPost("alex", env.Main("Support/Eskalation"), "t1", "@lotse a secret question")
	env.Clock.Advance(6 * time.Minute)
	deadline := time.Now().Add(10 * time.Second)
	for env.Metric("bothy_run_timeouts_total") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the timeout was not counted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var runID string
	env.Pool.QueryRow(t.Context(), `SELECT id::text FROM runs WHERE end_reason = 'timeout'`).Scan(&runID)
	var lines int
	for _, l := range buf.Lines(t) {
		if l["msg"] == "run timed out" {
			lines++
			if l["run_id"] != runID || l["thread_id"] == "" || l["level"] != "INFO" {
				t.Fatalf("timeout line %v, want run %s", l, runID)
			}
		}
	}
	if lines != 1 {
		t.Fatalf("%d timeout lines, want 1", lines)
	}
	if strings.Contains(buf.String(), "secret question") {
		t.Fatal("the log carries message content")
	}
}

// TestCORSPreflight: an allowed origin gets preflight answers on GraphQL
// and REST and marked answers; another origin gets no CORS headers.
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		config.HTTPCORSAllowedOrigins: "https://chat.example.com, https://admin.example.com", config.HTTPCORSMaxAge: "5m"}})
	preflight := func(path, origin, method string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, env.URL+path, nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct{ path, method string }{
		{"/graphql", http.MethodPost},
		{"/api/v1/me", http.MethodGet},
		{"/api/v1/threads/00000000-0000-4000-8000-000000000000/messages", http.MethodPost},
	} {
		wantPreflightAllowed(t, tc.path, tc.method, preflight(tc.path, "https://chat.example.com", tc.method))
		other := preflight(tc.path, "https://evil.example.com", tc.method)
		if other.Header.Get("Access-Control-Allow-Origin") != "" || other.Header.Get("Access-Control-Allow-Methods") != "" {
			t.Fatalf("preflight of another origin answered %v", other.Header)
		}
	}
	r := env.RESTWith(http.MethodGet, "/api/v1/me", env.World.Token("alex"), nil, http.Header{"Origin": {"https://admin.example.com"}})
	if r.Status != http.StatusOK || r.Header.Get("Access-Control-Allow-Origin") != "https://admin.example.com" ||
		!strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "Correlation-Id") || !strings.Contains(r.Header.Get("Vary"), "Origin") {
		t.Fatalf("cross-origin answer %d %v", r.Status, r.Header)
	}
	g := env.GraphQL(env.World.Token("alex"), `{ viewer { id } }`, nil, nil)
	if g.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("a same-origin request was marked")
	}
}

// wantPreflightAllowed checks resp, the answer to the preflight of
// method on path from the allowed origin https://chat.example.com: 204
// allowing that origin, the method and the headers Authorization and
// Content-Type, for http.cors_max_age (5 minutes).
func wantPreflightAllowed(t *testing.T, path, method string, resp *http.Response) {
	t.Helper()
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://chat.example.com" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), method) ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Content-Type") || h.Get("Access-Control-Max-Age") != "300" {
		t.Fatalf("preflight %s: %d %v", path, resp.StatusCode, h)
	}
}

// wantLongPollWoken parks a long poll of lotse, posts a trigger for it
// (client_msg_id key) and fails unless the poll is woken with events: the
// proof that wake-ups reach this server through its LISTEN connection.
func wantLongPollWoken(t *testing.T, env *apitest.Env, key string) {
	t.Helper()
	_, cursor := env.Poll(t, "lotse", "", 0)
	woke := make(chan int, 1)
	go func() {
		evs, _, err := env.PollDo("lotse", cursor, 20)
		if err != nil {
			t.Error(err)
		}
		woke <- len(evs)
	}()
	env.AwaitPolls(t, 1)
	env.MustPost("alex", env.Main("Support/Eskalation"), key, "@lotse still there?")
	select {
	case n := <-woke:
		if n == 0 {
			t.Fatal("the long poll ended without events")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll was not woken through the LISTEN connection")
	}
}

// TestPprofOnTheMetricsListenerOnly: with metrics.pprof the metrics
// listener serves Go's profiles under /debug/pprof/, the API's address
// never does; without it the metrics listener serves no profile.
func TestPprofOnTheMetricsListenerOnly(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		env := apitest.Start(t, apitest.Options{Config: map[string]string{config.MetricsAddr: "127.0.0.1:0", config.MetricsPprof: strconv.FormatBool(on)}})
		metrics := metricsBase(t, env)
		status, _, body := get(t, metrics+"/debug/pprof/goroutine?debug=1", nil)
		if profiled := status == http.StatusOK && strings.Contains(string(body), "goroutine profile:"); profiled != on {
			t.Fatalf("metrics.pprof %v: /debug/pprof/goroutine answered %d %.80q", on, status, body)
		}
		if status, _, _ := get(t, env.URL+"/debug/pprof/goroutine?debug=1", nil); status != http.StatusNotFound {
			t.Fatalf("metrics.pprof %v: the API's address answered /debug/pprof/ with %d", on, status)
		}
	}
}

// metricsBase waits until env's separate metrics listener is up (it
// starts with Serve, after apitest.Start returned) and returns its URL.
func metricsBase(t *testing.T, env *apitest.Env) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for env.Server.MetricsAddr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("no metrics listener")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return "http://" + env.Server.MetricsAddr()
}
