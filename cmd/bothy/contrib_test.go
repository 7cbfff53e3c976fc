package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gopkg.in/yaml.v3"

	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// tool returns the path of the program name, also when it lives in
// /usr/sbin outside PATH, and fails the test at once with the command that
// installs it (from the Debian package pkg) when it is missing.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin"} {
		if p := filepath.Join(dir, name); isExecutable(p) {
			return p
		}
	}
	t.Fatalf("%s is missing: install it with `apt-get install -y %s` (.ci/run does)", name, pkg)
	return ""
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// watch is an io.Writer that keeps what a process writes and wakes waiters
// when a text appears in it, so that tests wait for a log line, not for a
// while.
type watch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	waits map[string]chan struct{}
}

// Write implements io.Writer.
func (w *watch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for text, ch := range w.waits {
		if bytes.Contains(w.buf.Bytes(), []byte(text)) {
			close(ch)
			delete(w.waits, text)
		}
	}
	return len(p), nil
}

// String returns everything written so far.
func (w *watch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// seen returns a channel that is closed once text has been written.
func (w *watch) seen(text string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if bytes.Contains(w.buf.Bytes(), []byte(text)) {
		close(ch)
		return ch
	}
	if w.waits == nil {
		w.waits = map[string]chan struct{}{}
	}
	if old, ok := w.waits[text]; ok {
		return old
	}
	w.waits[text] = ch
	return ch
}

// iniFile reads a PgBouncer-style ini file: section -> key -> value, with
// ; and # comments.
func iniFile(t *testing.T, path string) map[string]map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, ";") || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			if out[section] == nil {
				out[section] = map[string]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not key = value in a section: %q", path, n, line)
			}
			k = strings.TrimSpace(k)
			if _, dup := out[section][k]; dup {
				t.Fatalf("%s:%d: %s set twice", path, n, k)
			}
			out[section][k] = strings.TrimSpace(v)
		}
	}
	return out
}

// restartingDB is a TCP proxy in front of PostgreSQL that plays a database
// restart: while it is down it drops every connection it carries and
// closes each new one at once, as PostgreSQL does while it stops and starts
// again.
type restartingDB struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
	// refused receives one value for each connection refused while down.
	refused chan struct{}
}

func startRestartingDB(t *testing.T, target string) *restartingDB {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &restartingDB{ln: ln, target: target, conns: map[net.Conn]bool{}, refused: make(chan struct{}, 64)}
	t.Cleanup(func() { ln.Close(); p.setDown(true) })
	go p.serve()
	return p
}

func (p *restartingDB) addr() string { return p.ln.Addr().String() }

func (p *restartingDB) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns[c] = true
		}
		p.mu.Unlock()
		if down {
			c.Close()
			select {
			case p.refused <- struct{}{}:
			default:
			}
			continue
		}
		go p.pipe(c)
	}
}

func (p *restartingDB) pipe(c net.Conn) {
	defer p.forget(c)
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		s.Close()
		return
	}
	p.conns[s] = true
	p.mu.Unlock()
	defer p.forget(s)
	done := make(chan struct{}, 2)
	go func() { io.Copy(s, c); done <- struct{}{} }()
	go func() { io.Copy(c, s); done <- struct{}{} }()
	<-done
}

func (p *restartingDB) forget(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// setDown stops (true) or starts (false) the database behind the proxy.
func (p *restartingDB) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// TestContribPgBouncer runs contrib/pgbouncer/pgbouncer.ini, with its
// addresses and paths replaced, in front of a test database: PgBouncer
// accepts the file (it refuses unknown or invalid settings), a client logs
// in with SCRAM and runs statements in transaction mode, and after a
// database restart the pooler serves again within a second or two: with
// PgBouncer's default server_login_retry of 15 s it refused clients for 15 s
// after the database was back.
func TestContribPgBouncer(t *testing.T) {
	t.Parallel()
	bin := tool(t, "pgbouncer", "pgbouncer")
	ini := filepath.Join("..", "..", "contrib", "pgbouncer", "pgbouncer.ini")
	retry := checkPgBouncerSettings(t, ini)

	direct, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	db := startRestartingDB(t, direct.Host)
	listen := freeAddr(t)
	out := startContribPgBouncer(t, bin, ini, listen, direct, db.addr())

	pooled := fmt.Sprintf("postgres://bothy:secret-of-the-test@%s/bothy?sslmode=disable&connect_timeout=5", listen)
	query := func(limit time.Duration) error { return pooledQuery(pooled, limit) }
	if err := query(5 * time.Second); err != nil {
		t.Fatalf("a statement through PgBouncer: %v\n%s", err, out.String())
	}
	if err := query(5 * time.Second); err != nil {
		t.Fatalf("a second client: %v", err)
	}

	// The database restarts: PgBouncer's server connections break, and its
	// next login fails. Clients keep trying, as the replicas' pools do; a
	// short wait each, so that the database comes back right after the
	// failed login and the wait measured below is PgBouncer's alone.
	db.setDown(true)
	downSince := time.Now()
	for refused := false; !refused; {
		query(200 * time.Millisecond)
		select {
		case <-db.refused:
			refused = true
		case <-time.After(50 * time.Millisecond):
		}
		if time.Since(downSince) > 15*time.Second {
			t.Fatalf("PgBouncer never tried to reach the stopped database:\n%s", out.String())
		}
	}
	db.setDown(false)
	back := time.Now()
	deadline := back.Add(10 * time.Second)
	var lastErr error
	for {
		if lastErr = query(5 * time.Second); lastErr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PgBouncer still fails 10s after the database came back: %v\n%s", lastErr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// server_login_retry plus the machine's slack; with the default of 15 s
	// this took 15 s.
	if d := time.Since(back); d > time.Duration(retry*float64(time.Second))+3*time.Second {
		t.Fatalf("PgBouncer served again %s after the database came back, want about server_login_retry (%gs)", d.Round(time.Millisecond), retry)
	}
}

// checkPgBouncerSettings checks the settings of the PgBouncer file ini the
// deployment relies on (transaction mode, a short server_login_retry, no
// login without a password) and returns server_login_retry in seconds.
func checkPgBouncerSettings(t *testing.T, ini string) float64 {
	t.Helper()
	settings := iniFile(t, ini)
	pg := settings["pgbouncer"]
	if pg["pool_mode"] != "transaction" {
		t.Fatalf("pool_mode = %q, want transaction (docs/operations.md, the pooler rule)", pg["pool_mode"])
	}
	retry, err := strconv.ParseFloat(pg["server_login_retry"], 64)
	if err != nil || retry <= 0 || retry > 2 {
		t.Fatalf("server_login_retry = %q, want a few seconds at most (its default of 15 keeps serving 503 long after a database restart)", pg["server_login_retry"])
	}
	if pg["auth_type"] == "trust" || pg["auth_type"] == "any" {
		t.Fatalf("auth_type = %s: every client on the network could log in", pg["auth_type"])
	}
	return retry
}

// startContribPgBouncer runs the PgBouncer binary bin on a copy of the
// file ini that listens on listen and pools the database of direct at
// dbAddr, and returns its output once it is up. The process is killed when
// the test ends.
func startContribPgBouncer(t *testing.T, bin, ini, listen string, direct *url.URL, dbAddr string) *watch {
	t.Helper()
	_, port, _ := net.SplitHostPort(listen)
	dbHost, dbPort, _ := net.SplitHostPort(dbAddr)

	// PgBouncer refuses to run as root; it then drops to the user postgres,
	// which must be able to read its files.
	dir, err := os.MkdirTemp("", "bothy-contrib-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	src, err := os.ReadFile(ini)
	if err != nil {
		t.Fatal(err)
	}
	// The test server trusts its user postgres; the client logs in to
	// PgBouncer as bothy with a password, as the replicas would.
	conf := strings.NewReplacer(
		"host=db.example.com port=5432 dbname=bothy", fmt.Sprintf("host=%s port=%s dbname=%s user=%s", dbHost, dbPort, strings.TrimPrefix(direct.Path, "/"), direct.User.Username()),
		"listen_port = 6432", "listen_port = "+port,
		"/etc/pgbouncer/userlist.txt", filepath.Join(dir, "userlist.txt"),
		"server_tls_sslmode = verify-full", "server_tls_sslmode = disable",
	).Replace(string(src))
	for _, want := range []string{dbHost + " port=" + dbPort, "listen_port = " + port, dir, "server_tls_sslmode = disable"} {
		if !strings.Contains(conf, want) {
			t.Fatalf("contrib/pgbouncer/pgbouncer.ini no longer has the expected placeholders (%q missing):\n%s", want, conf)
		}
	}
	os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(conf), 0o644)
	os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(`"bothy" "secret-of-the-test"`+"\n"), 0o644)
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bin, args...)
	out := &watch{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	select {
	case <-out.seen("process up"):
	case <-exited:
		t.Fatalf("pgbouncer refused contrib/pgbouncer/pgbouncer.ini:\n%s", out.String())
	case <-time.After(15 * time.Second):
		t.Fatalf("pgbouncer did not start:\n%s", out.String())
	}
	return out
}

// pooledQuery runs one transaction on a new client connection to pooled,
// as a replica's pool does after its connections broke, waiting up to
// limit.
func pooledQuery(pooled string, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c, err := pgconn.Connect(ctx, pooled)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, "BEGIN; SELECT 1; COMMIT").ReadAll()
	return err
}

// TestContribConfigIsDefaults: contrib/bothy.yaml loads, and every key it
// sets holds the registry default, so the example never claims a default
// that is not one. It names the keys an operator sets first.
func TestContribConfigIsDefaults(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "contrib", "bothy.yaml")
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatalf("contrib/bothy.yaml: %v", err)
	}
	defaults := config.Defaults()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	set := map[string]bool{}
	var walk func(prefix string, node any)
	walk = func(prefix string, node any) {
		if m, ok := node.(map[string]any); ok {
			for k, v := range m {
				walk(strings.TrimPrefix(prefix+"."+k, "."), v)
			}
			return
		}
		set[prefix] = true
	}
	walk("", tree)
	for _, k := range config.Registry() {
		var got, want any
		switch k.Type {
		case config.TypeInt:
			got, want = cfg.Int(k.Name), defaults.Int(k.Name)
		case config.TypeDuration:
			got, want = cfg.Duration(k.Name), defaults.Duration(k.Name)
		case config.TypeBool:
			got, want = cfg.Bool(k.Name), defaults.Bool(k.Name)
		default:
			got, want = cfg.String(k.Name), defaults.String(k.Name)
		}
		if got != want {
			t.Errorf("contrib/bothy.yaml sets %s to %v; its default is %v", k.Name, got, want)
		}
	}
	for _, name := range []string{config.ServerAddr, config.MetricsAddr, config.DatabaseMaxConns, config.DatabaseAutoMigrate,
		config.DatabasePoolerMode, config.DatabaseListenURL, config.HTTPTrustedProxies, config.HTTPCORSAllowedOrigins,
		config.WebsocketAllowedOrigins, config.ServerDrainDelay, config.ServerShutdownTimeout, config.LogLevel} {
		if !set[name] {
			t.Errorf("contrib/bothy.yaml does not name %s, which an operator sets first", name)
		}
	}
}
