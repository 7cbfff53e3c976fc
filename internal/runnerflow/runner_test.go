package runnerflow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/runner"
)

// childEnv names the mode in which this test binary runs as a runner's
// command (an MCP client on the Go SDK, with no Bothy code); childDir
// where it leaves what the test checks.
const (
	childEnv = "RUNNER_TEST_CHILD"
	childDir = "RUNNER_TEST_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	pgtest.Main(m)
}

// bearer adds the run token to every request of the MCP client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// child is the runner's command: answer reads the context and answers
// through /mcp; fail exits 3; silent exits 0 without answering; hang
// waits to be killed. Each writes its pid, its token, the tools it was
// given and its stdin to childDir first.
func child(mode string) int {
	dir := os.Getenv(childDir)
	stdin, _ := io.ReadAll(os.Stdin)
	_ = os.WriteFile(filepath.Join(dir, "stdin"), stdin, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "token"), []byte(os.Getenv("BOTHY_MCP_TOKEN")), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
	switch mode {
	case "fail":
		return 3
	case "silent":
		return 0
	case "hang":
		fmt.Println("child ready")
		time.Sleep(10 * time.Minute)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "runner-child", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Getenv("BOTHY_MCP_URL"),
		HTTPClient: &http.Client{Transport: bearer{os.Getenv("BOTHY_MCP_TOKEN")}}}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "connect:", err)
		return 1
	}
	defer s.Close()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "list:", err)
		return 1
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	_ = os.WriteFile(filepath.Join(dir, "tools"), []byte(strings.Join(names, ",")), 0o600)
	run := os.Getenv("BOTHY_RUN_ID")
	callText := func(tool string, args map[string]any) (string, bool) {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return err.Error(), true
		}
		var b strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String(), res.IsError
	}
	text, isErr := callText("read_run_context", map[string]any{"run_id": run})
	if isErr || !strings.Contains(text, "is the printer back?") {
		fmt.Fprintln(os.Stderr, "read_run_context:", text)
		return 1
	}
	if other := os.Getenv("RUNNER_TEST_OTHER_RUN"); other != "" {
		text, isErr := callText("read_run_context", map[string]any{"run_id": other})
		_ = os.WriteFile(filepath.Join(dir, "other"), []byte(fmt.Sprintf("%v %s", isErr, text)), 0o600)
	}
	if text, isErr := callText("post_answer", map[string]any{"run_id": run, "text": "Yes, the printer is back (through MCP)."}); isErr {
		fmt.Fprintln(os.Stderr, "post_answer:", text)
		return 1
	}
	return 0
}

// runOnce starts a runner of the test binary in mode for one run of lotse
// and returns the folder the child wrote to, after the adapter returned.
func runOnce(t *testing.T, env *apitest.Env, mode string, extraEnv ...string) (string, error) {
	return runOnceTo(t, env, mode, io.Discard, extraEnv...)
}

// runOnceTo is runOnce with the command's output to out.
func runOnceTo(t *testing.T, env *apitest.Env, mode string, out io.Writer, extraEnv ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client, err := agent.NewClient(env.URL, env.World.Token("lotse"), agent.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := agent.NewHolder()
	h, err := runner.Handler(runner.Config{Command: strconv.Quote(self) + " -test.run=^$", Client: client, Server: env.URL, Holder: holder,
		Env: append(os.Environ(), append(extraEnv, childEnv+"="+mode, childDir+"="+dir)...), KillGrace: 500 * time.Millisecond, Output: out})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	err = agent.Run(ctx, agent.Config{Client: client, Holder: holder, Once: true, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}, h)
	return dir, err
}

// one reads one text value of a query on the test database.
func one(t *testing.T, env *apitest.Env, sql string, args ...any) string {
	t.Helper()
	var v string
	if err := env.Pool.QueryRow(t.Context(), sql, args...).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// signalWriter closes ready at the first write that contains want.
type signalWriter struct {
	want  string
	ready chan struct{}
	once  bool
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if !w.once && strings.Contains(string(p), w.want) {
		w.once = true
		close(w.ready)
	}
	return len(p), nil
}

// alive reports whether process pid exists and is not a zombie (one that
// ended and waits for its parent, init for an orphan, to reap it).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("the command left no %s: %v", name, err)
	}
	return string(b)
}

// TestRunnerAnswersThroughMCP: a mention starts a run; the runner hands it
// to a command built on the Go SDK's MCP client, which gets the run token,
// the run's id and the trust-aware prompt, sees the six run tools, reads
// the context and answers through /mcp; the run completes with that one
// answer. The token reached no other run, and dies with its run.
func TestRunnerAnswersThroughMCP(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	// Another run of lotse, in another thread: out of the token's reach.
	env.MustPost("alex", env.Main("Support/Allgemein"), "rn-0", "@lotse first question")
	otherID := one(t, env, `SELECT id::text FROM runs`)
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+otherID+"/cancel", env.World.Token("alex"), nil, http.StatusOK)
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, "rn-1", "@lotse is the printer back?")
	dir, err := runOnce(t, env, "answer", "RUNNER_TEST_OTHER_RUN="+otherID)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, dir, "tools"); got != "await_approval,finish_run,post_answer,read_file,read_run_context,request_approval,update_live" {
		t.Fatalf("a run token's tools: %s", got)
	}
	if in := read(t, dir, "stdin"); !strings.Contains(in, "is the printer back?") || !strings.Contains(in, "<<<") {
		t.Fatalf("the prompt on stdin: %q", in)
	}
	if got := read(t, dir, "other"); !strings.HasPrefix(got, "true ") || !strings.Contains(got, "not_found") {
		t.Fatalf("another run through the run token: %s", got)
	}
	run := one(t, env, `SELECT id::text FROM runs WHERE thread_id = $1`, thread)
	if state := one(t, env, `SELECT state FROM runs WHERE id = $1`, run); state != "completed" {
		t.Fatalf("run %s", state)
	}
	if n := env.Count(`SELECT count(*) FROM messages m JOIN run_answers a ON a.message_id = m.id WHERE a.run_id = $1 AND m.content_md LIKE '%through MCP%'`, run); n != 1 {
		t.Fatalf("%d answers through MCP", n)
	}
	tok := read(t, dir, "token")
	if !strings.HasPrefix(tok, "bothy_r_") {
		t.Fatalf("token %q", tok)
	}
	apitest.WantProblem(t, "the run token after its run", env.REST(http.MethodGet, "/api/v1/runs/"+run, tok, nil), http.StatusUnauthorized, "unauthorized", "")
}

// TestRunnerFailures: a command that fails, and one that exits 0 without
// answering, fail the run with their reasons; nothing is posted.
func TestRunnerFailures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ mode, reason string }{{"fail", runner.ReasonFailed}, {"silent", runner.ReasonNoAnswer}} {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			env := apitest.Start(t, apitest.Options{})
			thread := env.Main("Support/Eskalation")
			env.MustPost("alex", thread, "rf-1", "@lotse is the printer back?")
			if _, err := runOnce(t, env, c.mode); err != nil {
				t.Fatal(err)
			}
			if n := env.Count(`SELECT count(*) FROM runs WHERE thread_id = $1 AND state = 'failed' AND end_reason = $2`, thread, c.reason); n != 1 {
				t.Fatalf("no run failed with %s", c.reason)
			}
			if n := env.Count(`SELECT count(*) FROM run_answers`); n != 0 {
				t.Fatalf("%d answers", n)
			}
		})
	}
}

// TestRunnerKillsOnCancel: Alex stops the run while the command works;
// the command's process is killed and the run ends cancelled.
func TestRunnerKillsOnCancel(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	thread := env.Main("Support/Eskalation")
	env.MustPost("alex", thread, "rk-1", "@lotse is the printer back?")
	dir := make(chan string, 1)
	done := make(chan error, 1)
	out := &signalWriter{want: "child ready", ready: make(chan struct{})}
	go func() {
		d, err := runOnceTo(t, env, "hang", out)
		dir <- d
		done <- err
	}()
	select {
	case <-out.ready:
	case err := <-done:
		t.Fatalf("the adapter returned before the command started: %v", err)
	}
	run := one(t, env, `SELECT id::text FROM runs WHERE thread_id = $1`, thread)
	env.MustREST(t, http.MethodPost, "/api/v1/runs/"+run+"/cancel", env.World.Token("alex"), nil, http.StatusOK)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d := <-dir
	pid, err := strconv.Atoi(read(t, d, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatalf("the command (pid %d) still runs", pid)
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'cancelled'`, run); n != 1 {
		t.Fatal("the run did not end cancelled")
	}
}
