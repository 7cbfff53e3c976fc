package server_test

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// startPgBouncer runs PgBouncer in transaction mode in front of the
// database of direct on a free port and returns the URL through it.
func startPgBouncer(t *testing.T, direct string) string {
	t.Helper()
	bin := pgBouncerBinary(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	args := []string{pgBouncerConfig(t, u, listen)}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bin, args...)
	var out apitest.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { cmd.Process.Kill(); cmd.Wait() }) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", listen))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer does not listen: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	pooled := *u
	pooled.Host = fmt.Sprintf("127.0.0.1:%d", listen)
	pooled.User = url.User(u.User.Username()) // the pooler trusts the test client
	return pooled.String()
}

// pgBouncerBinary finds the pgbouncer binary, on the path or where Debian's
// package puts it.
func pgBouncerBinary(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/pgbouncer"); statErr != nil {
			t.Fatal("pgbouncer is missing: install the Debian package pgbouncer (.ci/run does) for the pooler test")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	return bin
}

// pgBouncerConfig writes the configuration of a PgBouncer in transaction
// mode that listens on port listen in front of the database of u, trusting
// its user, and returns the path of its pgbouncer.ini.
func pgBouncerConfig(t *testing.T, u *url.URL, listen int) string {
	t.Helper()
	user := u.User.Username()
	password, _ := u.User.Password()
	dbname := strings.TrimPrefix(u.Path, "/")
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	// PgBouncer refuses to run as root; it then drops to the postgres user,
	// which must be able to read its files.
	dir, err := os.MkdirTemp("", "bothy-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	server := fmt.Sprintf("host=%s port=%s dbname=%s user=%s", host, port, dbname, user)
	if password != "" {
		server += " password=" + password
	}
	ini := fmt.Sprintf(`[databases]
%s = %s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 200
default_pool_size = 4
ignore_startup_parameters = extra_float_digits
`, dbname, server, listen, filepath.Join(dir, "users.txt"))
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", user)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "pgbouncer.ini")
}

// TestPgBouncerTransactionMode: with the pool through PgBouncer in
// transaction mode (database.pooler_mode) and LISTEN directly
// (database.listen_url), requests of both faces work, the server is ready,
// and a commit wakes a waiting long poll.
func TestPgBouncerTransactionMode(t *testing.T) {
	t.Parallel()
	direct := pgtest.URL(t)
	pooled := startPgBouncer(t, direct)
	env := apitest.Start(t, apitest.Options{DatabaseURL: direct, PoolURL: pooled, Config: map[string]string{
		config.DatabasePoolerMode: "true", config.DatabaseListenURL: direct, config.DatabaseMaxConns: "8",
		// The 40 requests below are one test's load, not a client to
		// throttle: on a busy machine they would wait out the
		// per-principal cap and be refused.
		config.HTTPMaxConcurrentPerPrincipal: "64"}})
	waitReady(t, env)

	// Many requests in parallel, so that statements of one connection of
	// the pool reach different server sessions.
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for i := 0; i < 20; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			var v viewerData
			if res, err := env.GraphQLDo(env.World.Token("alex"), viewerQuery, nil, &v); err != nil {
				errs <- err.Error()
			} else if len(res.Errors) > 0 || v.Viewer.Handle != "alex" {
				errs <- fmt.Sprintf("graphql viewer: %+v", res.Errors)
			}
		}()
		go func(i int) {
			defer wg.Done()
			if r, err := env.PostDo("sam", env.Main("Support/Allgemein"), fmt.Sprintf("pooled-%d", i), "through the pooler"); err != nil {
				errs <- err.Error()
			} else if r.Status != 201 {
				errs <- fmt.Sprintf("post: %d %s", r.Status, r.Body)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}

	// A long poll waits, then a trigger committed through the pooler wakes
	// it through the direct LISTEN connection.
	_, cursor := env.Poll(t, "lotse", "", 0)
	woke := make(chan []apitest.AgentEvent, 1)
	start := time.Now()
	go func() {
		evs, _, err := env.PollDo("lotse", cursor, 20)
		if err != nil {
			t.Error(err)
		}
		woke <- evs
	}()
	env.AwaitPolls(t, 1)
	env.MustPost("alex", env.Main("Support/Eskalation"), "wake", "@lotse please look")
	select {
	case evs := <-woke:
		if len(evs) == 0 {
			t.Fatal("the long poll ended without events")
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("the long poll woke after %s", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the long poll was not woken")
	}
	if v := env.Metric("bothy_listener_connected"); v != 1 {
		t.Fatalf("bothy_listener_connected %v", v)
	}
}
