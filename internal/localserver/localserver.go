// Package localserver starts a private Bothy server on 127.0.0.1 for the
// tools that check something against a real server from the command line:
// the conformance kit (`bothy conformance`) and the injection bench
// (`bothy bench injection`). The server runs in-process on a PostgreSQL
// cluster of its own (or on a database the caller names), with the
// configuration's defaults and the caller's settings, and it answers
// REST and GraphQL calls made with any principal's token.
package localserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgcluster"
	"bothy.example.com/bothy/internal/server"
)

// Options configure Start.
type Options struct {
	// Dir is a folder of the caller's: without DatabaseURL the cluster
	// lives in Dir/postgres (not ephemeral, so that Outage can start it
	// again on the same folder; the caller removes Dir).
	Dir string
	// DatabaseURL names a database to serve instead of a cluster of its
	// own (a test's clone of the migrated template); it is migrated first.
	DatabaseURL string
	// Settings are configuration keys set beyond the defaults, by name
	// (config.RunLeaseTimeout, ...). Unmetered holds those that lift the
	// rate limits.
	Settings map[string]string
	// MaxConns bounds the server's pool (default 20).
	MaxConns int
}

// Unmetered returns the settings that lift the rate limits and the bound
// of requests in flight per principal: a tool that drives many
// conversations at once measures the agent, not the limits (those are
// tested in docs/reliability.md).
func Unmetered() map[string]string {
	return map[string]string{
		config.RateMessageBurst: "10000", config.RateMessagePerMinute: "100000",
		config.RateReadBurst: "10000", config.RateReadPerMinute: "100000",
		config.RateAgentRuntimeBurst: "10000", config.RateAgentRuntimePerMinute: "100000",
		config.RateAdminBurst: "10000", config.RateAdminPerMinute: "100000",
		config.RateFileBurst: "10000", config.RateFilePerMinute: "100000",
		config.HTTPMaxConcurrentPerPrincipal: "64",
	}
}

// Server is a running private server.
type Server struct {
	// URL is the server's base address (http://127.0.0.1:PORT).
	URL string
	// Server is the assembled server: its module services build worlds
	// (world.Of(Server.Modules())) and write what no client may (imports).
	Server *server.Server

	http   *http.Client
	pool   closer
	cancel context.CancelFunc
	served chan error

	mu      sync.Mutex
	cluster *pgcluster.Cluster
	pgDir   string
	// filesDir is the folder of uploaded files when the server made it
	// itself (no Dir): removed by Close.
	filesDir string
}

type closer interface{ Close() }

// Start starts the database (unless opts.DatabaseURL names one), migrates
// it and serves on a free port of 127.0.0.1 until Close.
//
// Errors: no PostgreSQL server binaries, a database that does not answer,
// a setting the configuration refuses, no free port.
func Start(ctx context.Context, opts Options) (*Server, error) {
	s := &Server{http: &http.Client{Timeout: 60 * time.Second}}
	url := opts.DatabaseURL
	if url == "" {
		s.pgDir = filepath.Join(opts.Dir, "postgres")
		// Without fsync: the cluster is thrown away after the run, and its
		// stops are clean (pgcluster.NoSync).
		c, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: s.pgDir, NoSync: true})
		if err != nil {
			return nil, err
		}
		s.cluster, url = c, c.URL("postgres")
	}
	if err := s.serve(ctx, url, opts); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// serve migrates url and serves it with the settings of opts.
func (s *Server) serve(ctx context.Context, url string, opts Options) error {
	if err := db.Migrate(ctx, url); err != nil {
		return err
	}
	cfg, err := config.Load("", nil)
	if err != nil {
		return err
	}
	// A private server of a tool shares its machine with the adapter and
	// the model under test: its database work may wait seconds for the CPU
	// without the database being gone, so the bounds of a frozen database
	// (5 s and 2 s by default) are a minute and half a minute here.
	settings := map[string]string{config.ServerDrainDelay: "0s", config.DatabaseQueryTimeout: "60s", config.DatabaseAcquireTimeout: "30s"}
	// Files live with the server's other data, never in the default
	// /var/lib/bothy/files of an installation.
	files := filepath.Join(opts.Dir, "files")
	if opts.Dir == "" {
		if files, err = os.MkdirTemp("", "bothy-files-"); err != nil {
			return err
		}
		s.filesDir = files
	}
	settings[config.FilesStorage] = "file://" + files
	for k, v := range opts.Settings {
		settings[k] = v
	}
	for k, v := range settings {
		if cfg, err = cfg.With(k, v); err != nil {
			return err
		}
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 20
	}
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: opts.MaxConns})
	if err != nil {
		return err
	}
	s.pool = pool
	srv, err := server.New(server.Deps{Config: cfg, Pool: pool, DatabaseURL: url, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.Server, s.URL, s.cancel, s.served = srv, "http://"+ln.Addr().String(), cancel, make(chan error, 1)
	go func() { s.served <- srv.Serve(sctx, ln) }()
	return nil
}

// Close stops serving, closes the pool and stops the cluster it started.
func (s *Server) Close() {
	// Idle connections of this process's clients (this Server's and every
	// other on http.DefaultTransport, such as the kit's proxy) close first:
	// net/http's Shutdown leaves a connection that never carried a request
	// open for five seconds, since a request might still come on it, and
	// the drain would wait that long for nothing.
	s.http.CloseIdleConnections()
	if s.cancel != nil {
		s.cancel()
		<-s.served
	}
	if s.pool != nil {
		s.pool.Close()
	}
	s.mu.Lock()
	c := s.cluster
	s.mu.Unlock()
	if c != nil {
		_ = c.Stop()
	}
	if s.filesDir != "" {
		_ = os.RemoveAll(s.filesDir)
	}
}

// Outage stops the database for d and starts it again on the same folder
// and port, as an operator's restart would.
//
// Errors: the server runs on a database of the caller's (DatabaseURL); the
// cluster cannot be stopped or started again.
func (s *Server) Outage(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	c := s.cluster
	s.mu.Unlock()
	if c == nil {
		return errors.New("localserver: no cluster of its own to stop")
	}
	port := c.Port()
	if err := c.Stop(); err != nil {
		return err
	}
	// Until nothing answers on the port: a start before the old server is
	// gone would meet it shutting down.
	for i := 0; i < 300; i++ {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			break
		}
		conn.Close()
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(d)
	next, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: s.pgDir, Port: port, NoSync: true})
	if err != nil {
		return fmt.Errorf("localserver: start the database again: %w", err)
	}
	s.mu.Lock()
	s.cluster = next
	s.mu.Unlock()
	return nil
}

// Import stores a message of origin import in thread, attributed to the
// principal principalID, as the server's import path does (no client may
// write one).
//
// Errors: the principal or the thread does not exist; the content is
// empty.
func (s *Server) Import(ctx context.Context, thread, principalID, content string) error {
	ps, err := s.Server.Identity.GetMany(ctx, []string{principalID})
	if err != nil {
		return err
	}
	p, ok := ps[principalID]
	if !ok {
		return fmt.Errorf("localserver: no principal %s", principalID)
	}
	_, err = s.Server.Modules().Writers.Messaging.Import(ctx, thread, p.Ref(), content)
	return err
}

// REST calls the server with token and decodes the answer into out (nil:
// none); it returns the status. A status of 300 or more is an error
// naming it and the body.
func (s *Server) REST(ctx context.Context, method, path, token string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

// GQL runs a GraphQL operation with token and decodes its data into out.
//
// Errors: the call's (REST); the first GraphQL error's message.
func (s *Server) GQL(ctx context.Context, token, query string, vars map[string]any, out any) error {
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if _, err := s.REST(ctx, http.MethodPost, "/graphql", token, map[string]any{"query": query, "variables": vars}, &env); err != nil {
		return err
	}
	if len(env.Errors) > 0 {
		return errors.New(env.Errors[0].Message)
	}
	return json.Unmarshal(env.Data, out)
}
