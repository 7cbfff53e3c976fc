package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"bothy.example.com/bothy/internal/bench/capacity"
	"bothy.example.com/bothy/internal/world"
)

// cmdBenchCapacity runs "bothy bench capacity" (internal/bench/capacity)
// against a running server with the example world and prints its report.
func cmdBenchCapacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench capacity", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", "", "base URL of the server under load (required), e.g. http://127.0.0.1:8080")
	worldFile := fs.String("world", defaultDevData+"/world.json", "the example world's ids and tokens, as bothy dev writes them")
	base := fs.String("base", "2,40,1", "level 1 as MESSAGES_PER_SECOND,LISTENERS,RUNS_PER_SECOND; level k is k times it")
	maxLevel := fs.Int("max-level", 64, "highest level tried")
	step := fs.Duration("step", 15*time.Second, "how long each level is held")
	limit := fs.Duration("p99", 250*time.Millisecond, "highest p99 from commit to the last listener of a level that holds")
	subs := fs.Int("subscriptions", 1, "events subscriptions per WebSocket connection")
	pprofURL := fs.String("pprof", "", "the server's metrics listener with metrics.pprof on (http://HOST:PORT): a CPU profile of each level names the bottleneck")
	serverPid := fs.Int("server-pid", 0, "the server's process: its CPU (and its children's) is sampled from /proc")
	dbPid := fs.Int("db-pid", 0, "the PostgreSQL postmaster: its CPU and its backends' is sampled from /proc")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: bothy bench capacity --server URL [--world FILE] [--base M,L,R] [--max-level K] [--step D] [--pprof URL] [--server-pid N --db-pid N] [--json]\n\n"+
			"Ramps load on a running server with the example world (bothy dev): writer posts in Support/Allgemein, alex asks\n"+
			"lotse there (one SDK adapter in this process answers), WebSocket listeners of alex, sam, robin and writer follow\n"+
			"the events. Reports the highest level at which no request fails, every message reaches every listener, every run\n"+
			"is answered and p99 delivery stays within --p99, and the first bottleneck (docs/performance.md). The server needs\n"+
			"its rate limits and websocket.max_connections_per_principal raised (make bench-capacity does it).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("bench capacity takes no arguments, got %q", fs.Arg(0))}
	}
	b, err := parseBase(*base)
	if err != nil {
		return usageError{err.Error()}
	}
	if *server == "" || *maxLevel < 1 || *step <= 0 || *limit <= 0 || *subs < 1 {
		return usageError{"bench capacity needs --server, --max-level and --subscriptions at least 1, --step and --p99 above 0"}
	}
	w, err := readWorld(*worldFile)
	if err != nil {
		return err
	}
	opts := capacity.Options{Server: *server, World: w, Base: b, MaxLevel: *maxLevel, StepDuration: *step, P99Limit: *limit,
		SubsPerConn: *subs, PprofURL: *pprofURL, ServerPid: *serverPid, DatabasePid: *dbPid, Progress: stderr}
	ctx, stop := signalContext(ctx)
	defer stop()
	rep, err := capacity.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.Write(stdout)
	return nil
}

// parseBase reads --base: messages per second, listeners, runs per second.
func parseBase(s string) (capacity.Step, error) {
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return capacity.Step{}, fmt.Errorf("--base %q: want MESSAGES_PER_SECOND,LISTENERS,RUNS_PER_SECOND", s)
	}
	m, err1 := strconv.ParseFloat(f[0], 64)
	l, err2 := strconv.Atoi(f[1])
	r, err3 := strconv.ParseFloat(f[2], 64)
	if err := errors.Join(err1, err2, err3); err != nil || m <= 0 || l < 1 || r < 0 {
		return capacity.Step{}, fmt.Errorf("--base %q: messages above 0, listeners at least 1, runs not negative", s)
	}
	return capacity.Step{Messages: m, Listeners: l, Runs: r}, nil
}

// readWorld reads a world.json.
func readWorld(path string) (*world.World, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--world: %w (start bothy dev first, or name its world.json)", err)
	}
	var w world.World
	if err := json.Unmarshal(b, &w); err != nil {
		return nil, fmt.Errorf("--world %s: %w", path, err)
	}
	return &w, nil
}
