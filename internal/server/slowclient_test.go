package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// dial opens a raw connection to the test server.
func dial(t *testing.T, env *apitest.Env) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// closedWithin reports whether the server closes conn within d (reads
// until EOF or an error other than the test's own deadline).
func closedWithin(conn net.Conn, d time.Duration) bool {
	conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		_, err := conn.Read(buf)
		if err == nil {
			continue
		}
		if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		return true
	}
}

func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{
		"http.read_timeout": "1s", "http.idle_timeout": "1s", "http.write_timeout": "1s", "events.poll_max_wait": "3s"}})
	path := "/api/v1/threads/" + env.Main("Support/Allgemein") + "/messages"

	t.Run("trickled body, authenticated", func(t *testing.T) {
		conn := dial(t, env)
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1048000\r\n\r\n{", path, env.World.Token("alex"))
		start := time.Now()
		cut := false
		for time.Since(start) < 5*time.Second {
			if _, err := conn.Write([]byte(" ")); err != nil {
				cut = true
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if !cut && !closedWithin(conn, time.Second) {
			t.Fatalf("a trickling body kept its connection for %v", time.Since(start))
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Fatalf("cut after %v, read timeout is 1s", took)
		}
	})

	t.Run("unauthenticated body is not read", func(t *testing.T) {
		conn := dial(t, env)
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1048000\r\n\r\n{", path)
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer before the body: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		conn := dial(t, env)
		fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		start := time.Now()
		conn.SetReadDeadline(time.Now().Add(4 * time.Second))
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("data on an idle connection")
		} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("idle connection still open after %v", time.Since(start))
		}
	})

	t.Run("long poll outlives the write timeout", func(t *testing.T) {
		start := time.Now()
		r := env.REST(http.MethodGet, "/api/v1/agent/events?wait=2", env.World.Token("lotse"), nil)
		if r.Status != http.StatusOK {
			t.Fatalf("poll: %d %s", r.Status, r.Body)
		}
		if took := time.Since(start); took < 1900*time.Millisecond {
			t.Fatalf("poll answered after %v, want the full wait", took)
		}
	})
}

func TestConcurrencyCapPerPrincipal(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"http.max_concurrent_per_principal": "2", "http.max_concurrent_wait": "200ms", "events.poll_max_wait": "3s"}})
	lotse := env.World.Token("lotse")
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := env.Do(http.MethodGet, "/api/v1/agent/events?wait=2", lotse, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	env.AwaitPolls(t, 2)
	r := env.REST(http.MethodGet, "/api/v1/me", lotse, nil)
	p := apitest.WantProblem(t, "third request", r, http.StatusTooManyRequests, "rate_limited", "too_many_concurrent")
	if r.Header.Get("Retry-After") == "" || p.Detail == "" {
		t.Fatalf("429 without Retry-After or detail: %v %+v", r.Header, p)
	}
	var v struct {
		Viewer struct {
			ID string `json:"id"`
		} `json:"viewer"`
	}
	if res := env.GraphQL(lotse, `{ viewer { id } }`, nil, &v); len(res.Errors) != 1 || res.Errors[0].Extensions.Reason != "too_many_concurrent" || res.Status != http.StatusTooManyRequests {
		t.Fatalf("GraphQL third request: %d %+v", res.Status, res.Errors)
	}
	// Another principal is not affected.
	if r := env.REST(http.MethodGet, "/api/v1/me", env.World.Token("alex"), nil); r.Status != http.StatusOK {
		t.Fatalf("alex: %d", r.Status)
	}
	wg.Wait()
	if r := env.REST(http.MethodGet, "/api/v1/me", lotse, nil); r.Status != http.StatusOK {
		t.Fatalf("after the polls: %d", r.Status)
	}
}

// TestConcurrencyCapQueuesBursts: requests over the cap wait for a slot
// (http.max_concurrent_wait) instead of failing at once.
func TestConcurrencyCapQueuesBursts(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"http.max_concurrent_per_principal": "2"}})
	var wg sync.WaitGroup
	statuses := make([]int, 12)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := env.Do(http.MethodGet, "/api/v1/me", env.World.Token("alex"), nil)
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = r.Status
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		if st != http.StatusOK {
			t.Fatalf("request %d: %d", i, st)
		}
	}
}
