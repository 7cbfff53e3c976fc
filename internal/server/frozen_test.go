package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/pgcluster"
)

// procStat returns the state letter and the parent pid of process pid from
// /proc/<pid>/stat. The command name in parentheses may hold spaces and
// parentheses itself, so the fields are counted after its last ")".
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return f[0][0], ppid, err == nil
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, d := range dirs {
		p, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if _, parent, ok := procStat(p); ok && parent == pid {
			out = append(out, p)
		}
	}
	return out
}

// freezeCluster suspends the cluster's postmaster and every process it
// forked (SIGSTOP), as a hung host or stalled storage would: connections
// stay open and the kernel still accepts new ones, but nothing answers. The
// backends lead process groups of their own, so they are signalled one by
// one. It returns once every process is stopped, and returns thaw (SIGCONT
// to the same processes), which the test's cleanup runs as well, so that a
// failing test never leaves a suspended server for the cluster's Stop.
func freezeCluster(t *testing.T, c *pgcluster.Cluster) (thaw func()) {
	t.Helper()
	pid, err := c.PID()
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	frozen := []int{pid}
	thaw = func() {
		once.Do(func() {
			for _, p := range frozen {
				syscall.Kill(p, syscall.SIGCONT)
			}
		})
	}
	t.Cleanup(thaw)
	// The postmaster first: stopped, it forks no backend the list misses.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP postmaster %d: %v", pid, err)
	}
	for _, child := range childrenOf(t, pid) {
		if syscall.Kill(child, syscall.SIGSTOP) == nil { // one that exited meanwhile is no matter
			frozen = append(frozen, child)
		}
	}
	if len(frozen) < 2 {
		t.Fatalf("postmaster %d has no children to freeze", pid)
	}
	// A signal is delivered asynchronously: wait until the kernel reports
	// every process stopped (state T).
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range frozen {
		for {
			state, _, ok := procStat(p)
			if !ok || state == 'T' {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the cluster not stopped: state %c", p, state)
			}
			time.Sleep(5 * time.Millisecond) // the poll's pace, not a wait that decides
		}
	}
	return thaw
}

// rawAnswer is an answer read by hangClient.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
}

// hangClient tells an answer from a hang: its timeout is far above the
// bounds of the test's configuration (1 s and 500 ms) and far below
// http.write_timeout (30 s), which held writes before the bound existed.
var hangClient = &http.Client{Timeout: 15 * time.Second}

// send sends one request with hangClient; an error means no answer came.
func send(method, url, token, body string) (rawAnswer, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return rawAnswer{}, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hangClient.Do(req)
	if err != nil {
		return rawAnswer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return rawAnswer{status: resp.StatusCode, header: resp.Header, body: data}, err
}

// wantUnavailable checks that a REST answer is 503 unavailable
// (database_unreachable) with Retry-After.
func wantUnavailable(t *testing.T, what string, a rawAnswer) {
	t.Helper()
	var p apitest.Problem
	json.Unmarshal(a.body, &p)
	if a.status != http.StatusServiceUnavailable || p.Code != "unavailable" || p.Reason != "database_unreachable" || a.header.Get("Retry-After") == "" {
		t.Errorf("%s: %d Retry-After %q %s; want 503 unavailable database_unreachable with Retry-After",
			what, a.status, a.header.Get("Retry-After"), a.body)
	}
}

// wantGraphQLUnavailable checks that a GraphQL answer is 503 with one
// error unavailable (database_unreachable) and Retry-After.
func wantGraphQLUnavailable(t *testing.T, what string, a rawAnswer) {
	t.Helper()
	var gql struct {
		Errors []apitest.GQLError `json:"errors"`
	}
	json.Unmarshal(a.body, &gql)
	if a.status != http.StatusServiceUnavailable || len(gql.Errors) != 1 || gql.Errors[0].Extensions.Code != "unavailable" ||
		gql.Errors[0].Extensions.Reason != "database_unreachable" || a.header.Get("Retry-After") == "" {
		t.Errorf("%s: %d Retry-After %q %s", what, a.status, a.header.Get("Retry-After"), a.body)
	}
}

// writeAfterThaw writes (frozen-2, frozen-3, ...) until a write succeeds
// after the thaw, within 30 s: the first may still meet the outage's end
// (503), never another answer.
func writeAfterThaw(t *testing.T, write func(id string) (rawAnswer, error)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 2; ; i++ {
		a, err := write(fmt.Sprintf("frozen-%d", i))
		if err != nil {
			t.Fatalf("a write after the thaw got no answer: %v", err)
		}
		if a.status == http.StatusCreated {
			return
		}
		if a.status != http.StatusServiceUnavailable {
			t.Fatalf("a write after the thaw: %d %s", a.status, a.body)
		}
		if time.Now().After(deadline) {
			t.Fatal("no write succeeded within 30s of the thaw")
		}
		time.Sleep(50 * time.Millisecond) // the retries' pace, not a wait that decides
	}
}

// TestFrozenDatabaseAnswers: a database that keeps its connections open
// but answers nothing (its processes suspended) makes requests answer 503
// unavailable with Retry-After within database.query_timeout and
// database.acquire_timeout, on both faces, instead of holding them until
// the write timeout; /readyz fails meanwhile; once the database answers
// again writes succeed without a restart, and the outage is logged once.
func TestFrozenDatabaseAnswers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, _, _, url := outageCluster(t, ctx)
	logs := &apitest.Buffer{}
	env := apitest.Start(t, apitest.Options{DatabaseURL: url, Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		// The defaults: a frozen database must answer well inside the
		// client's 15 s, and a busy machine (make test on two cores) must
		// not take a slow answer for a frozen one before the freeze.
		Config: map[string]string{config.DatabaseQueryTimeout: "5s", config.DatabaseAcquireTimeout: "2s"}})
	main := env.Main("Support/Allgemein")
	alex := env.World.Token("alex")
	write := func(id string) (rawAnswer, error) {
		return send(http.MethodPost, env.URL+"/api/v1/threads/"+main+"/messages", alex,
			`{"client_msg_id":"`+id+`","content_md":"a message from Alex"}`)
	}
	// The pool holds open connections to the server before it freezes.
	if a, err := write("frozen-0"); err != nil || a.status != http.StatusCreated {
		t.Fatalf("the write before the freeze: %v %d %s", err, a.status, a.body)
	}

	thaw := freezeCluster(t, cluster)
	a, err := write("frozen-1")
	if err != nil {
		t.Fatalf("a REST write to the frozen database got no answer: %v", err)
	}
	wantUnavailable(t, "REST write", a)

	a, err = send(http.MethodPost, env.URL+"/graphql", alex, `{"query":"{ thread(id: \"`+main+`\") { id } }"}`)
	if err != nil {
		t.Fatalf("a GraphQL read of the frozen database got no answer: %v", err)
	}
	wantGraphQLUnavailable(t, "GraphQL read", a)

	a, err = send(http.MethodGet, env.URL+"/readyz", "", "")
	if err != nil {
		t.Fatalf("/readyz on the frozen database got no answer: %v", err)
	}
	if a.status != http.StatusServiceUnavailable || !strings.Contains(string(a.body), `"database_unreachable"`) {
		t.Errorf("/readyz: %d %s; want 503 database_unreachable", a.status, a.body)
	}

	thaw()
	// Writes succeed again without a restart; the first may still meet
	// the outage's end (503), never another answer.
	writeAfterThaw(t, write)
	waitReady(t, env)

	// The outage is logged as for a stopped database: one line at its
	// start, one at its end (the watcher's, within a second or two), no
	// internal error.
	msgs := wantOneOutage(t, logs, 10*time.Second)
	if n := countMsg(msgs, "internal error"); n > 0 {
		t.Errorf("%d internal error lines during the freeze", n)
	}
}
