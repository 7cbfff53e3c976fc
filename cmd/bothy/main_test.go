package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/internal/world"
	"bothy.example.com/bothy/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// find returns the first line with message msg (nil when none).
func find(lines []map[string]any, msg string) map[string]any {
	for _, l := range lines {
		if l["msg"] == msg {
			return l
		}
	}
	return nil
}

// build makes the release binary with `make dist` (static, with the
// version and revision stamped) into a temporary folder.
func build(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-C", filepath.Join("..", ".."), "dist", "DISTDIR="+dir, "GO="+goTool)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make dist: %v\n%s", err, out)
	}
	bins, _ := filepath.Glob(filepath.Join(dir, "bothy-*"))
	if len(bins) != 1 {
		t.Fatalf("make dist made %v, want one bothy-VERSION-GOOS-GOARCH", bins)
	}
	return bins[0]
}

// runCmd runs the binary to its end and returns stdout, stderr and the exit
// code.
func runCmd(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("bothy %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// emptyDatabase creates a database without any migration.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	admin, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := db.Open(t.Context(), db.Options{URL: admin, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	name := fmt.Sprintf("cli_%d", time.Now().UnixNano())
	if _, err := pool.Exec(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// embedded counts the migrations the binary carries.
func embedded(t *testing.T) int {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no embedded migrations (%v)", err)
	}
	return len(files)
}

// freeAddr returns a free 127.0.0.1 port.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a running `bothy serve`.
type proc struct {
	cmd    *exec.Cmd
	base   string
	logs   *apitest.Buffer
	exited chan struct{}
}

// serve starts `bothy serve` and waits for its serving log line.
func serve(t *testing.T, bin string, env []string) *proc {
	t.Helper()
	addr := freeAddr(t)
	p := &proc{cmd: exec.Command(bin, "serve", "--addr", addr), base: "http://" + addr, logs: &apitest.Buffer{}, exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stderr = p.logs
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			p.cmd.Process.Kill()
			<-p.exited
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(p.logs.String(), `"msg":"serving"`) {
		select {
		case <-p.exited:
			t.Fatalf("bothy serve exited: %v\n%s", p.cmd.ProcessState, p.logs.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("bothy serve did not start\n%s", p.logs.String())
		}
	}
	return p
}

// ready waits until /readyz answers want and returns its body.
func (p *proc) ready(t *testing.T, want int) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return string(body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz = %d %s, want %d", resp.StatusCode, body, want)
			}
		} else if time.Now().After(deadline) {
			t.Fatalf("/readyz: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// longPolls waits until the process's /metrics shows n long polls in
// progress (bothy_long_polls_waiting): the observable sign that a poll the
// test started has reached the server, instead of a sleep.
func (p *proc) longPolls(t *testing.T, n int) {
	t.Helper()
	want := fmt.Sprintf("bothy_long_polls_waiting %d\n", n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(p.base + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if strings.Contains(string(body), want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in /metrics (last error %v)", strings.TrimSpace(want), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits up to limit for the process to exit and returns its code.
func (p *proc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(limit):
		t.Fatalf("bothy serve still runs after %s\n%s", limit, p.logs.String())
		return -1
	}
}

// seed builds the example world on the database of env.
func seed(t *testing.T, bin string, env []string) *world.World {
	t.Helper()
	out, stderr, code := runCmd(t, bin, env, "seed", "--json")
	if code != 0 {
		t.Fatalf("seed: %d %s", code, stderr)
	}
	var w world.World
	if err := json.Unmarshal([]byte(out), &w); err != nil {
		t.Fatal(err)
	}
	return &w
}

// TestBinary runs the release binary of make dist: static and stamped, the
// version command, the migrate commands and their usage errors, migrate
// status --check, the warning about unknown BOTHY_ variables, serving
// without DDL, the drain on SIGTERM (also past its hard bound), SIGHUP, the
// systemd units and their documented install, the nginx example in front
// of two replicas (subscriptions and /mcp included), README.md's own
// installation run as written, a bad log.level, and that every
// log line is JSON. Its subtests set the environment of the binary only,
// never the test process's.
func TestBinary(t *testing.T) {
	t.Parallel()
	bin := build(t)
	base := withoutBothyEnv(os.Environ())

	t.Run("version", func(t *testing.T) { binaryVersion(t, bin, base) })

	t.Run("migrate usage errors", func(t *testing.T) { migrateUsageErrors(t, bin, base) })

	t.Run("migrate status --check", func(t *testing.T) { migrateStatusCheck(t, bin, base) })

	t.Run("unknown BOTHY_ variables warn", func(t *testing.T) { unknownVariablesWarn(t, bin, base) })

	t.Run("migrate status and auto_migrate off", func(t *testing.T) { migrateWithAutoMigrateOff(t, bin, base) })

	t.Run("drain on SIGTERM", func(t *testing.T) { drainOnSIGTERM(t, bin, base) })

	t.Run("shutdown_timeout is a hard bound", func(t *testing.T) { shutdownTimeoutBound(t, bin, base) })

	t.Run("SIGHUP is ignored", func(t *testing.T) { sighupIgnored(t, bin, base) })

	t.Run("systemd units", func(t *testing.T) {
		systemdUnits(t, bin)
	})

	t.Run("systemd install as documented", func(t *testing.T) {
		systemdInstall(t, bin, pgtest.URL(t))
	})

	t.Run("nginx TLS proxy in front of two replicas", func(t *testing.T) {
		nginxProxy(t, bin, append(base, "BOTHY_DATABASE_URL="+pgtest.URL(t), "BOTHY_SERVER_DRAIN_DELAY=0s",
			"BOTHY_HTTP_TRUSTED_PROXIES=127.0.0.2"))
	})

	t.Run("README's own installation", func(t *testing.T) {
		installation(t, bin, base)
	})
	t.Run("invalid log.level stops the start", func(t *testing.T) { invalidLogLevel(t, bin, base) })
	t.Run("metrics.pprof without metrics.addr stops the start", func(t *testing.T) { pprofWithoutMetricsAddr(t, bin, base) })
}

// binaryVersion checks the version stamp of make dist in the release
// binary's name and in bothy version and --version, that the binary is
// static, and that version takes no argument.
func binaryVersion(t *testing.T, bin string, base []string) {
	// make dist stamps the version of git describe and the revision.
	rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	desc, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	want := "bothy " + strings.TrimSpace(string(desc)) + " (revision " + strings.TrimSpace(string(rev))
	if !strings.HasSuffix(bin, "bothy-"+strings.TrimSpace(string(desc))+"-"+runtime.GOOS+"-"+runtime.GOARCH) {
		t.Fatalf("release binary named %s", filepath.Base(bin))
	}
	for _, arg := range []string{"version", "--version"} {
		out, _, code := runCmd(t, bin, base, arg)
		if code != 0 || !strings.HasPrefix(out, want) || !strings.Contains(out, info.GoVersion) {
			t.Fatalf("bothy %s: %d %q, want it to start with %q", arg, code, out, want)
		}
	}
	// Static: no program interpreter, no shared libraries.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the release binary is dynamically linked (%v)", p.Type)
		}
	}
	if _, _, code := runCmd(t, bin, base, "version", "extra"); code != 2 {
		t.Fatalf("bothy version extra exited %d, want 2", code)
	}
}

// migrateUsageErrors checks that mistaken migrate command lines are usage
// errors (exit 2) that leave the database untouched.
func migrateUsageErrors(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABASE_URL="+emptyDatabase(t))
	for _, args := range [][]string{{"migrate", "down"}, {"migrate", "up", "now"}, {"migrate", "status", "all"}, {"migrate", "--bogus"}, {"nonsense"}} {
		_, stderr, code := runCmd(t, bin, env, args...)
		if code != 2 || !strings.Contains(stderr, "usage") && !strings.Contains(stderr, "unknown") && !strings.Contains(stderr, "not defined") {
			t.Fatalf("bothy %v: exit %d %q, want a usage error (2)", args, code, stderr)
		}
	}
	// None of them touched the database.
	out, _, code := runCmd(t, bin, env, "migrate", "status")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("0 applied, %d pending", embedded(t))) {
		t.Fatalf("status after usage errors: %d %q", code, out)
	}
}

// migrateStatusCheck checks the exit status of migrate status --check: 3
// while migrations are pending, 0 when current, 1 without a database; and
// that --check belongs to status alone and is documented.
func migrateStatusCheck(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABASE_URL="+emptyDatabase(t))
	// Pending migrations: the list, a line on stderr, exit status 3.
	out, stderr, code := runCmd(t, bin, env, "migrate", "status", "--check")
	if code != 3 || !strings.Contains(out, fmt.Sprintf("0 applied, %d pending", embedded(t))) || !strings.Contains(stderr, "bothy migrate") {
		t.Fatalf("status --check of an empty database: exit %d, want 3\n%s%s", code, out, stderr)
	}
	if _, stderr, code := runCmd(t, bin, env, "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, stderr)
	}
	out, stderr, code = runCmd(t, bin, env, "migrate", "status", "--check")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d applied, 0 pending", embedded(t))) {
		t.Fatalf("status --check of a current database: exit %d, want 0\n%s%s", code, out, stderr)
	}
	// No database is neither current nor pending: 1.
	unreachable := append(base, "BOTHY_DATABASE_URL=postgres://bothy@127.0.0.1:1/bothy?connect_timeout=5")
	if _, stderr, code := runCmd(t, bin, unreachable, "migrate", "status", "--check"); code != 1 {
		t.Fatalf("status --check without a database: exit %d, want 1\n%s", code, stderr)
	}
	// --check belongs to status; plain migrate must not take it for a
	// dry run and migrate.
	if _, stderr, code := runCmd(t, bin, env, "migrate", "--check"); code != 2 {
		t.Fatalf("migrate --check: exit %d, want a usage error (2)\n%s", code, stderr)
	}
	_, help, code := runCmd(t, bin, env, "migrate", "status", "--help")
	if code != 0 || !strings.Contains(help, "-check") || !strings.Contains(help, "status 3") {
		t.Fatalf("migrate status --help does not document --check and its exit status 3:\n%s", help)
	}
}

// unknownVariablesWarn checks that every command warns once, in JSON, about
// a misspelt BOTHY_ variable, naming the nearest key and never the
// variable's value.
func unknownVariablesWarn(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABSE_URL=postgres://bothy:hunter2@db.example.com/bothy", "BOTHY_AGENT_TOKEN=bothy_a_x",
		"BOTHY_MODEL_API_KEY=k", "BOTHY_LOG_LEVEL=info")
	for _, args := range [][]string{{"version"}, {"--help"}, {"config", "markdown"}, {"migrate", "status"}, {"agent", "run", "--help"}} {
		_, stderr, _ := runCmd(t, bin, env, args...)
		if strings.Contains(stderr, "hunter2") {
			t.Fatalf("bothy %v showed the value of the variable:\n%s", args, stderr)
		}
		var warned []map[string]any
		for _, l := range strings.Split(stderr, "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == unknownEnvMsg {
				warned = append(warned, m)
			}
		}
		if len(warned) != 1 || warned[0]["variable"] != "BOTHY_DATABSE_URL" || warned[0]["nearest"] != "BOTHY_DATABASE_URL" || warned[0]["level"] != "WARN" {
			t.Fatalf("bothy %v: warnings %v, want one JSON line for BOTHY_DATABSE_URL naming BOTHY_DATABASE_URL\n%s", args, warned, stderr)
		}
	}
}

// migrateWithAutoMigrateOff checks migrate status before and after migrate,
// and that serve with database.auto_migrate off starts on the old schema,
// not ready until someone migrates, and warns about it.
func migrateWithAutoMigrateOff(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABASE_URL="+emptyDatabase(t), "BOTHY_DATABASE_AUTO_MIGRATE=false", "BOTHY_SERVER_DRAIN_DELAY=0s")
	out, _, code := runCmd(t, bin, env, "migrate", "status")
	if code != 0 || !strings.Contains(out, "pending  00001 00001_identity.sql") {
		t.Fatalf("status of an empty database: %d %q", code, out)
	}
	// Without auto_migrate the server starts on the old schema and is
	// not ready until someone migrates.
	p := serve(t, bin, env)
	if body := p.ready(t, http.StatusServiceUnavailable); !strings.Contains(body, `"reason":"migrations_pending"`) {
		t.Fatalf("readiness behind the schema: %s", body)
	}
	if out, stderr, code := runCmd(t, bin, env, "migrate"); code != 0 || !strings.Contains(out, "applied 00001 00001_identity.sql") {
		t.Fatalf("migrate: %d %q %s", code, out, stderr)
	}
	p.ready(t, http.StatusOK)
	out, _, _ = runCmd(t, bin, env, "migrate", "status")
	if !strings.Contains(out, "applied  00001 00001_identity.sql") || !strings.Contains(out, fmt.Sprintf("%d applied, 0 pending", embedded(t))) {
		t.Fatalf("status after migrate: %q", out)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := p.logs.Lines(t)
	if l := find(lines, "the database schema is behind this binary; /readyz answers migrations_pending until bothy migrate runs"); l == nil || l["schema_version"] != float64(0) {
		t.Fatalf("no warning about the old schema:\n%s", p.logs.String())
	}
	if find(lines, "migration applied") != nil {
		t.Fatal("serve migrated with database.auto_migrate false")
	}
}

// drainOnSIGTERM checks the drain on SIGTERM: readiness turns first while
// requests are still served, a long poll in flight is answered, the process
// exits 0 after the drain delay, and every step is logged.
func drainOnSIGTERM(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABASE_URL="+emptyDatabase(t), "BOTHY_SERVER_DRAIN_DELAY=1s", "BOTHY_SERVER_SHUTDOWN_TIMEOUT=5s")
	p := serve(t, bin, env)
	w := seed(t, bin, env)
	p.ready(t, http.StatusOK)
	// A long poll in flight when SIGTERM arrives.
	polled := startLongPoll(p.base, w.Principals["lotse"].Token)
	p.longPolls(t, 1)
	sent := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	// Readiness turns first, while requests are still served.
	body := p.ready(t, http.StatusServiceUnavailable)
	if !strings.Contains(body, `"reason":"draining"`) {
		t.Fatalf("readiness while draining: %s", body)
	}
	resp, err := http.Get(p.base + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("not serving during the drain delay: %v", err)
	}
	resp.Body.Close()
	if got := <-polled; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"events":[]`) {
		t.Fatalf("the long poll in flight answered %s", got)
	}
	if code := p.wait(t, 6*time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.logs.String())
	}
	if d := time.Since(sent); d < time.Second {
		t.Fatalf("stopped after %s, before the drain delay", d)
	}
	checkDrainLogs(t, p)
}

// startLongPoll starts an agent's long poll (wait=30) against base and
// returns where its answer arrives, as "status body" or the error: the
// request in flight that a drain must still answer.
func startLongPoll(base, token string) <-chan string {
	polled := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/agent/events?wait=30", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		polled <- fmt.Sprintf("%d %s", resp.StatusCode, body)
	}()
	return polled
}

// checkDrainLogs checks that a drained process logged every step of its
// life, from starting and the migration to stopped with exit code 0.
func checkDrainLogs(t *testing.T, p *proc) {
	t.Helper()
	lines := p.logs.Lines(t)
	for _, msg := range []string{"starting", "serving", "drain started: readiness answers 503 draining",
		"drain: listener closed, waiting for requests in flight", "drain: requests in flight finished", "stopped"} {
		if find(lines, msg) == nil {
			t.Fatalf("no %q line:\n%s", msg, p.logs.String())
		}
	}
	if l := find(lines, "serving"); l["address"] == "" || l["schema_version"] != float64(db.EmbeddedVersion()) || l["version"] == "" {
		t.Fatalf("serving line %v", l)
	}
	if l := find(lines, "migration applied"); l == nil || l["name"] != "00001_identity.sql" {
		t.Fatalf("no migration line: %v", l)
	}
	if l := find(lines, "stopped"); l["exit_code"] != float64(0) {
		t.Fatalf("stopped line %v", l)
	}
}

// shutdownTimeoutBound checks that a request in flight for ever does not
// hold the process past server.shutdown_timeout.
func shutdownTimeoutBound(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABASE_URL="+pgtest.URL(t), "BOTHY_SERVER_DRAIN_DELAY=0s", "BOTHY_SERVER_SHUTDOWN_TIMEOUT=2s")
	p := serve(t, bin, env)
	p.ready(t, http.StatusOK)
	// A request whose body never comes stays in flight forever.
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	time.Sleep(300 * time.Millisecond)
	sent := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 4*time.Second); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.logs.String())
	}
	if d := time.Since(sent); d < 2*time.Second || d > 3500*time.Millisecond {
		t.Fatalf("stopped after %s, want about server.shutdown_timeout (2s)", d)
	}
	if find(p.logs.Lines(t), "drain: server.shutdown_timeout reached, requests in flight cancelled") == nil {
		t.Fatalf("no cancellation line:\n%s", p.logs.String())
	}
}

// sighupIgnored checks that SIGHUP is logged and ignored, that an
// authentication failure is a JSON line too, and that serve warns first
// about an unknown BOTHY_ variable.
func sighupIgnored(t *testing.T, bin string, base []string) {
	// BOTHY_LOG_LEVLE: serve warns first, in JSON like its other lines.
	env := append(base, "BOTHY_DATABASE_URL="+pgtest.URL(t), "BOTHY_SERVER_DRAIN_DELAY=0s", "BOTHY_LOG_LEVLE=debug")
	p := serve(t, bin, env)
	p.ready(t, http.StatusOK)
	p.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(p.logs.String(), "SIGHUP received and ignored") {
		if time.Now().After(deadline) {
			t.Fatalf("no SIGHUP line:\n%s", p.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-p.exited:
		t.Fatalf("SIGHUP ended the process: %v", p.cmd.ProcessState)
	case <-time.After(200 * time.Millisecond):
	}
	p.ready(t, http.StatusOK)
	// A REST authentication failure is a JSON line too.
	req, _ := http.NewRequest(http.MethodGet, p.base+"/api/v1/me", nil)
	req.Header.Set("Authorization", "Bearer bothy_s_nope")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bad token: %v %v", resp, err)
	}
	resp.Body.Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 15*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	lines := p.logs.Lines(t)
	if len(lines) == 0 || lines[0]["msg"] != unknownEnvMsg || lines[0]["variable"] != "BOTHY_LOG_LEVLE" || lines[0]["nearest"] != "BOTHY_LOG_LEVEL" {
		t.Fatalf("serve did not warn first about BOTHY_LOG_LEVLE:\n%s", p.logs.String())
	}
}

// invalidLogLevel checks that an invalid log.level stops the start with
// exit status 1 and one JSON stopped line, nothing on stdout.
func invalidLogLevel(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABASE_URL="+pgtest.URL(t), "BOTHY_LOG_LEVEL=verbose")
	stdout, stderr, code := runCmd(t, bin, env, "serve", "--addr", "127.0.0.1:0")
	var line struct {
		Msg, Error string
		ExitCode   int `json:"exit_code"`
	}
	// Like every other line of serve: the JSON stopped line, nothing on
	// stdout.
	if code != 1 || stdout != "" || json.Unmarshal([]byte(strings.TrimSpace(stderr)), &line) != nil || line.Msg != "stopped" ||
		line.ExitCode != 1 || !strings.Contains(line.Error, "log.level") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1 and one JSON stopped line naming log.level", code, stdout, stderr)
	}
}

// pprofWithoutMetricsAddr checks that metrics.pprof without metrics.addr
// stops the start with exit status 1 and a stopped line naming it.
func pprofWithoutMetricsAddr(t *testing.T, bin string, base []string) {
	env := append(base, "BOTHY_DATABASE_URL="+pgtest.URL(t), "BOTHY_METRICS_PPROF=true")
	_, stderr, code := runCmd(t, bin, env, "serve", "--addr", "127.0.0.1:0")
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	var last struct{ Msg, Error string }
	if code != 1 || json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil || last.Msg != "stopped" || !strings.Contains(last.Error, "metrics.pprof needs metrics.addr") {
		t.Fatalf("exit %d, stderr %q; want 1 and a stopped line naming metrics.pprof", code, stderr)
	}
}

// withoutBothyEnv returns environ without BOTHY_ variables: the binary's
// tests set their own, and count the warnings about unknown ones.
func withoutBothyEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "BOTHY_") {
			out = append(out, kv)
		}
	}
	return out
}

// selfSigned writes a certificate and key for 127.0.0.1 into dir and returns
// their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "chat.example.com"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"chat.example.com"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "privkey.pem")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return certPath, keyPath, pool
}

// nginxProxy runs contrib/nginx-bothy.conf, with its addresses and
// certificate paths replaced, in front of two replicas, and checks TLS,
// long-poll-safe proxying to both, the hidden /metrics and the client
// address in the access log (nginx connects from 127.0.0.2, the trusted
// proxy, and forwards the client 127.0.0.1).
func nginxProxy(t *testing.T, bin string, env []string) {
	nginx := tool(t, "nginx", "nginx")
	// Behind the proxy the replicas name the proxy's URL as theirs
	// (http.public_url), as docs/operations.md says to set it.
	listen := freeAddr(t)
	env = append(env, "BOTHY_HTTP_PUBLIC_URL=https://"+listen)
	p1, p2 := serve(t, bin, env), serve(t, bin, env)
	w := seed(t, bin, env)
	dir := t.TempDir()
	certPath, keyPath, roots := selfSigned(t, dir)
	writeNginxConf(t, dir, listen, certPath, keyPath, p1, p2)
	cmd := exec.Command(nginx, "-e", "stderr", "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	var out apitest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	base := "https://" + listen
	waitNginxReady(t, client, base, &out)
	nginxGraphQL(t, client, base, w.Principals["alex"].Token)
	if resp, err := client.Get(base + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics through nginx: %v %v", resp, err)
	}
	cids := nginxCorrelation(t, client, base, w.Principals["alex"].Token)
	nginxSubscription(t, client, base, w)
	nginxMCP(t, client, base, w)
	checkReplicaLogs(t, cids, p1, p2)
}

// writeNginxConf writes into dir contrib/nginx-bothy.conf as site.conf,
// listening on listen with the certificate and key given, proxying to
// replicas p1 and p2 from 127.0.0.2, and an nginx.conf that runs it in the
// foreground with every path in dir.
func writeNginxConf(t *testing.T, dir, listen, certPath, keyPath string, p1, p2 *proc) {
	t.Helper()
	site, err := os.ReadFile(filepath.Join("..", "..", "contrib", "nginx-bothy.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := strings.NewReplacer(
		"127.0.0.1:8080", strings.TrimPrefix(p1.base, "http://"),
		"127.0.0.1:8081", strings.TrimPrefix(p2.base, "http://"),
		"listen 443 ssl", "listen "+listen+" ssl",
		"/etc/ssl/bothy/fullchain.pem", certPath,
		"/etc/ssl/bothy/privkey.pem", keyPath,
		"proxy_pass http://bothy;", "proxy_pass http://bothy;\n        proxy_bind 127.0.0.2;",
	).Replace(string(site))
	if strings.Count(conf, dir) != 2 || !strings.Contains(conf, "proxy_bind") || !strings.Contains(conf, listen) {
		t.Fatalf("contrib/nginx-bothy.conf no longer has the expected placeholders:\n%s", conf)
	}
	os.WriteFile(filepath.Join(dir, "site.conf"), []byte(conf), 0o644)
	main := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr warn;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/site.conf;
}
`, dir)
	os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644)
}

// waitNginxReady waits up to 15 s for base, nginx in front of the
// replicas, to answer /readyz with 200; out is nginx's output.
func waitNginxReady(t *testing.T, client *http.Client, base string, out *apitest.Buffer) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready answer through nginx: %v\n%s", err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nginxGraphQL sends GraphQL requests with token, Alex's, through nginx at
// base, enough for both replicas, with an X-Forwarded-For header that nginx
// must replace, and checks their answers.
func nginxGraphQL(t *testing.T, client *http.Client, base, token string) {
	t.Helper()
	for i := 0; i < 4; i++ {
		req, _ := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query":"query ThroughProxy { viewer { handle } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Forwarded-For", "198.51.100.66") // forged: nginx replaces it
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"handle":"alex"`) {
			t.Fatalf("GraphQL through nginx: %d %s", resp.StatusCode, body)
		}
	}
}

// checkReplicaLogs checks the logs of the replicas p1 and p2: both served
// requests through nginx, with the client address nginx forwarded, and
// together they logged every correlation id of cids.
func checkReplicaLogs(t *testing.T, cids []string, p1, p2 *proc) {
	t.Helper()
	for i, p := range []*proc{p1, p2} {
		seen := 0
		for _, l := range p.logs.Lines(t) {
			if l["msg"] == "request" && l["operation"] == "ThroughProxy" {
				seen++
				if l["client"] != "127.0.0.1" {
					t.Fatalf("replica %d logged client %v, want 127.0.0.1 from X-Forwarded-For", i+1, l["client"])
				}
			}
		}
		if seen == 0 {
			t.Fatalf("replica %d served no request through nginx", i+1)
		}
	}
	// The replicas name each request by the id the client or nginx gave it.
	for _, cid := range cids {
		logged := false
		for _, p := range []*proc{p1, p2} {
			for _, l := range p.logs.Lines(t) {
				logged = logged || l["msg"] == "request" && l["correlation_id"] == cid
			}
		}
		if !logged {
			t.Fatalf("no replica logged a request with correlation_id %s", cid)
		}
	}
}

// nginxCorrelation checks that nginx forwards the correlation id Bothy
// honours (Correlation-Id): a valid one of the client's is kept; without
// one, or with one Bothy would not keep, nginx's $request_id (32 hex
// digits) names the request, so that nginx's and Bothy's logs agree. It
// returns the ids the replicas must have logged.
func nginxCorrelation(t *testing.T, client *http.Client, base, token string) []string {
	t.Helper()
	requestID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	var ids []string
	for _, sent := range []string{"", "client-trace-0001", "bad id!"} {
		req, _ := http.NewRequest(http.MethodPost, base+"/graphql", strings.NewReader(`{"query":"query Correlated { viewer { handle } }"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		if sent != "" {
			req.Header.Set("Correlation-Id", sent)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got := resp.Header.Get("Correlation-Id")
		switch {
		case sent == "client-trace-0001" && got != sent:
			t.Fatalf("Correlation-Id %q sent through nginx came back as %q", sent, got)
		case sent != "client-trace-0001" && !requestID.MatchString(got):
			t.Fatalf("Correlation-Id %q sent through nginx came back as %q, want nginx's $request_id", sent, got)
		}
		ids = append(ids, got)
	}
	return ids
}

// nginxSubscription opens a GraphQL subscription over WebSocket through
// nginx, as a browser on the proxy's port would (with its Origin, port
// included: nginx must pass the Host with its port, or Bothy refuses the
// origin), and waits for the event of a message posted through nginx.
// mcpBearer adds a bearer token to the requests of an MCP client.
type mcpBearer struct {
	token string
	next  http.RoundTripper
}

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// nginxMCP checks /mcp through the proxy: the Go SDK's client lists and
// calls Alex's tools over the proxy's TLS address (the SDK's localhost
// protection must not refuse the proxy's Host), and the protected resource
// metadata names the address the client used, with https.
func nginxMCP(t *testing.T, client *http.Client, base string, w *world.World) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "through-nginx", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: mcpBearer{w.Principals["alex"].Token, client.Transport}}}, nil)
	if err != nil {
		t.Fatalf("MCP through nginx: %v", err)
	}
	defer s.Close()
	tools, err := s.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 7 {
		t.Fatalf("MCP tools through nginx: %v %v", tools, err)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "list_channels", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_channels through nginx: %v %+v", err, res)
	}
	resp, err := client.Get(base + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"resource":"`+base+`/mcp"`) {
		t.Fatalf("protected resource metadata through nginx: %s", body)
	}
}

// nginxSubscription checks a GraphQL subscription over a WebSocket through
// nginx: the connection is acknowledged and a message posted through nginx
// arrives as a next of the subscription.
func nginxSubscription(t *testing.T, client *http.Client, base string, w *world.World) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ws := dialGraphQLWS(ctx, t, client, base)
	defer ws.ws.CloseNow()
	ws.send(t, wsMsg{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + w.Principals["alex"].Token + `"}`)})
	if m, err := ws.read(10 * time.Second); err != nil || m.Type != "connection_ack" {
		t.Fatalf("connection_init through nginx: %+v %v", m, err)
	}
	ws.send(t, wsMsg{ID: "e", Type: "subscribe", Payload: json.RawMessage(`{"query":"subscription { events(after: \"now\") { seq } }"}`)})
	// The protocol does not say when a subscription is live: post until
	// an event arrives (the first post may commit before "now" is taken).
	thread := w.Channel("Support/Allgemein").MainThreadID
	for i := 0; ; i++ {
		postThroughNginx(t, client, base, thread, w.Principals["alex"].Token, i)
		m, err := ws.read(3 * time.Second)
		if err == nil {
			if m.Type != "next" || m.ID != "e" || !strings.Contains(string(m.Payload), `"seq"`) {
				t.Fatalf("want a next for the subscription, got %+v", m)
			}
			return
		}
		if !errors.Is(err, context.DeadlineExceeded) || i == 5 {
			t.Fatalf("no event through nginx after %d posts: %v", i+1, err)
		}
	}
}

// wsMsg is a message of the graphql-transport-ws protocol.
type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// wsConn is a graphql-transport-ws connection with one reader for its
// life: coder/websocket closes the connection when a read's context ends,
// so reads never time out.
type wsConn struct {
	ctx     context.Context
	ws      *websocket.Conn
	msgs    chan wsMsg
	readErr chan error
}

// dialGraphQLWS opens a graphql-transport-ws WebSocket to base's /graphql
// with base as Origin, failing the test if nginx or the server refuses it;
// the caller closes it.
func dialGraphQLWS(ctx context.Context, t *testing.T, client *http.Client, base string) *wsConn {
	t.Helper()
	ws, resp, err := websocket.Dial(ctx, "wss"+strings.TrimPrefix(base, "https")+"/graphql", &websocket.DialOptions{
		HTTPClient: client, Subprotocols: []string{"graphql-transport-ws"}, HTTPHeader: http.Header{"Origin": {base}}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("WebSocket through nginx with Origin %s: %v (HTTP %d)", base, err, status)
	}
	c := &wsConn{ctx: ctx, ws: ws, msgs: make(chan wsMsg, 16), readErr: make(chan error, 1)}
	go func() {
		for {
			var m wsMsg
			if err := wsjson.Read(ctx, ws, &m); err != nil {
				c.readErr <- err
				return
			}
			c.msgs <- m
		}
	}()
	return c
}

// send writes m, failing the test if it cannot.
func (c *wsConn) send(t *testing.T, m wsMsg) {
	t.Helper()
	if err := wsjson.Write(c.ctx, c.ws, m); err != nil {
		t.Fatalf("send %s: %v", m.Type, err)
	}
}

// read returns the next message, the connection's read error, or
// context.DeadlineExceeded if none arrives within limit.
func (c *wsConn) read(limit time.Duration) (wsMsg, error) {
	select {
	case m := <-c.msgs:
		return m, nil
	case err := <-c.readErr:
		return wsMsg{}, err
	case <-time.After(limit):
		return wsMsg{}, context.DeadlineExceeded
	}
}

// postThroughNginx posts message i to thread through nginx as the holder
// of token and checks that it was created.
func postThroughNginx(t *testing.T, client *http.Client, base, thread, token string, i int) {
	t.Helper()
	body := fmt.Sprintf(`{"client_msg_id":"through-nginx-%d","content_md":"through nginx"}`, i)
	req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/threads/"+thread+"/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("post through nginx: %d", resp.StatusCode)
	}
}
