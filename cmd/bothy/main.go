// Command bothy is the Bothy server: a team chat in which AI agents are
// members like people. Subcommands: serve, dev, migrate, migrate status,
// seed, token create, agent run, conformance, bench injection, config
// markdown, version. main only parses flags and calls
// internal/server (or sdk/agent for agent run). Every command first
// warns about BOTHY_ environment variables that nothing reads.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/clock"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgcluster"
	"bothy.example.com/bothy/internal/platform/tracing"
	"bothy.example.com/bothy/internal/platform/version"
	"bothy.example.com/bothy/internal/playground"
	"bothy.example.com/bothy/internal/server"
	"bothy.example.com/bothy/internal/world"
	"bothy.example.com/bothy/sdk/agent"
	"bothy.example.com/bothy/sdk/httptool"
	"bothy.example.com/bothy/sdk/model/anthropic"
	"bothy.example.com/bothy/sdk/model/openai"
	"bothy.example.com/bothy/sdk/runner"
)

const usage = `bothy: the Bothy team chat server

Usage:
  bothy serve   [--config FILE] [--addr HOST:PORT] [--metrics-addr HOST:PORT]
                                                        run the server on database.url
  bothy dev     [--config FILE] [--addr HOST:PORT] [--data DIR]
                                                        run the server on the embedded development database
  bothy migrate [--config FILE] [--data DIR]            apply pending migrations to database.url; exit status 4
                                                        when the schema is newer than this binary can serve
  bothy migrate status [--check] [--rollback-to N] [--config FILE] [--data DIR]
                                                        list applied and pending migrations of database.url;
                                                        and whether this binary serves the schema; --check: exit
                                                        status 3 while migrations are pending, 4 when the schema
                                                        is newer than this binary can serve; --rollback-to N:
                                                        whether a binary whose newest migration is N serves it
  bothy seed    [--config FILE] [--data DIR] [--json]   build the example world on database.url
  bothy admin ...                                       administer on database.url: create-owner, principal create|disable|enable|list,
                                                        token create|list|revoke, audit export (bothy admin --help)
  bothy token create --handle H [--config FILE] [--data DIR] [--label L] [--ttl D]
                                                        issue a token for the principal with handle H (= bothy admin token create)
  bothy login --server URL                              sign in through the server's identity provider (device grant)
                                                        and keep the session token in the user's configuration folder
  bothy logout                                          end that session at the server and delete the file
  bothy token show                                      print the kept session token (curl -H "Authorization: Bearer $(bothy token show)")
  bothy config markdown                                 print docs/configuration.md
  bothy conformance --adapter "COMMAND" [--json] [--capabilities CAP,...] [--only NAME]
                                                        check an agent adapter against the run contract on a private server
  bothy bench injection [--json] [--model obedient|openai|anthropic] [--cases N] [--only ORIGIN]
                                                        how far planted instructions drive an agent's tools, with and
                                                        without trust markers, on a private server
  bothy documents hashes FILE|DIR...                    print the trusted-documents file (graphql.trusted_documents)
                                                        of a client's .graphql operations
  bothy version                                         print the version and VCS revision (also --version)
  bothy agent run --token T --server URL [--once] [--transport poll|ws|auto] [--model echo|openai|anthropic --base-url URL --model-name NAME | --runner COMMAND]
                                                        run the reference agent adapter for the agent of token T
                                                        (--runner: each run goes to COMMAND through /mcp on a run token)

migrate, seed and token create use the database of a running bothy dev (found
through its data folder, --data, default .bothy-dev) when database.url is empty.

Run "bothy <command> --help" for the flags of a command.
`

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	var usageErr usageError
	var logged loggedError
	var status exitStatus
	switch {
	case err == nil:
	case errors.As(err, &status):
		fmt.Fprintln(os.Stderr, "bothy:", err)
		os.Exit(status.code)
	case errors.As(err, &logged):
		// serve already wrote the error as a JSON log line.
		os.Exit(1)
	case errors.As(err, &usageErr):
		fmt.Fprintln(os.Stderr, "bothy:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "bothy:", err)
		os.Exit(1)
	}
}

// loggedError is an error that serving already logged through the JSON
// logger, so that main writes no second, plain-text line.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// exitStatus is an outcome that is no failure but that scripts tell apart
// by the exit status code (migrate status --check: 3, migrations pending).
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string { return e.msg }

// exitPending is the exit status of migrate status --check while
// migrations are pending; 1 stays "failed" (no database, for example) and
// 2 a usage error.
const exitPending = 3

// exitSchemaNewer is the exit status of migrate status --check, and of
// migrate, when the schema is newer than this binary can serve
// (db.SchemaNewer); of migrate status --check --rollback-to when it is
// newer than the older binary can serve.
const exitSchemaNewer = 4

// run runs the command of args, writing its output to stdout and its logs
// and problems to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	defer func() {
		// --help printed the command's help: that is a success.
		if errors.Is(err, flag.ErrHelp) {
			err = nil
		}
	}()
	// Before anything else, so that even a command that fails to start
	// names the variable that was meant to configure it.
	warnUnknownEnv(stderr, os.Environ())
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	return runCommand(ctx, args[0], args[1:], stdout, stderr)
}

// runCommand runs the command named name with the arguments after it:
// here those that serve or administer the server's database (database.url
// or that of a bothy dev), in toolCommand the others.
func runCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	switch name {
	case "serve":
		return cmdServe(ctx, args, stdout, stderr)
	case "dev":
		return cmdDev(ctx, args, stdout, stderr)
	case "migrate":
		return cmdMigrate(ctx, args, stdout, stderr)
	case "seed":
		return cmdSeed(ctx, args, stdout, stderr)
	case "admin":
		return cmdAdmin(ctx, args, stdout, stderr)
	case "token":
		return cmdToken(ctx, args, stdout, stderr)
	default:
		return toolCommand(ctx, name, args, stdout, stderr)
	}
}

// toolCommand runs the commands that work on no configured database: those
// of a client of a server (login, logout, agent), the checks that start a
// private server of their own (conformance, bench), and those that only
// print.
func toolCommand(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	switch name {
	case "version", "--version":
		return cmdVersion(args, stdout)
	case "login":
		return cmdLogin(ctx, args, stdout, stderr)
	case "logout":
		return cmdLogout(ctx, args, stdout)
	case "agent":
		return cmdAgent(ctx, args, stdout, stderr)
	case "documents":
		return cmdDocuments(args, stdout)
	case "conformance":
		return cmdConformance(ctx, args, stdout, stderr)
	case "bench":
		return cmdBench(ctx, args, stdout, stderr)
	case "config":
		return cmdConfig(args, stdout)
	default:
		return usageError{fmt.Sprintf("unknown command %q\n\n%s", name, usage)}
	}
}

// cmdVersion prints the version and VCS revision (bothy version).
func cmdVersion(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageError{"usage: bothy version"}
	}
	fmt.Fprintln(stdout, version.Get())
	return nil
}

// cmdToken dispatches bothy token show and bothy token create (the
// latter is bothy admin token create).
func cmdToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) >= 1 && args[0] == "show" {
		return cmdTokenShow(args[1:], stdout)
	}
	if len(args) >= 1 && isHelp(args[0]) {
		fmt.Fprint(stdout, "Usage: bothy token create --handle H [--config FILE] [--data DIR] [--label L] [--ttl D]\n\nRun \"bothy token create --help\" for its flags.\n")
		return nil
	}
	if len(args) < 1 || args[0] != "create" {
		return usagef("usage: bothy token create --handle H")
	}
	return adminTokenCreate(ctx, "token create", args[1:], stdout, stderr)
}

// cmdAgent dispatches bothy agent run.
func cmdAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) >= 1 && isHelp(args[0]) {
		fmt.Fprint(stdout, "Usage: bothy agent run --token T --server URL [--once] [--model echo]\n\nRun \"bothy agent run --help\" for its flags.\n")
		return nil
	}
	if len(args) < 1 || args[0] != "run" {
		return errors.New("usage: bothy agent run --token T --server URL [--once] [--transport poll|ws|auto] [--model echo|openai|anthropic --base-url URL --model-name NAME]")
	}
	return cmdAgentRun(ctx, args[1:], stderr)
}

// cmdConfig prints docs/configuration.md (bothy config markdown).
func cmdConfig(args []string, stdout io.Writer) error {
	if len(args) >= 1 && isHelp(args[0]) || len(args) >= 2 && args[0] == "markdown" && isHelp(args[1]) {
		fmt.Fprint(stdout, "Usage: bothy config markdown\n\nPrints the reference of every configuration key (docs/configuration.md) as Markdown.\n")
		return nil
	}
	if len(args) != 1 || args[0] != "markdown" {
		return errors.New("usage: bothy config markdown")
	}
	fmt.Fprint(stdout, config.Markdown())
	return nil
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// common flags of the commands that read the configuration.
type common struct {
	fs         *flag.FlagSet
	configFile string
}

func newFlags(name, summary string, stderr io.Writer) *common {
	c := &common{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	c.fs.SetOutput(stderr)
	c.fs.StringVar(&c.configFile, "config", "", "YAML configuration file (keys: docs/configuration.md)")
	c.fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bothy %s [flags]\n\n%s\n\nFlags:\n", name, summary)
		c.fs.PrintDefaults()
	}
	return c
}

func (c *common) load() (*config.Config, error) {
	return config.Load(c.configFile, os.Environ())
}

// newLogger returns the JSON logger of log.level (which config.Load has
// already checked against its choices).
func newLogger(cfg *config.Config, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.String(config.LogLevel))); err != nil {
		return nil, fmt.Errorf("config key log.level: %q is not a level", cfg.String(config.LogLevel))
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

func needURL(cfg *config.Config) (string, error) {
	u := cfg.String(config.DatabaseURL)
	if u == "" {
		return "", fmt.Errorf("database.url is empty: set it in the config file or as %s (bothy dev starts an embedded database instead)", config.EnvName(config.DatabaseURL))
	}
	return u, nil
}

func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newFlags("serve", "Runs the server on the database of database.url, applying pending migrations first\n(unless database.auto_migrate is false). SIGTERM or SIGINT drains and stops it; SIGHUP is logged and ignored.", stderr)
	addr := c.fs.String("addr", "", "listen address HOST:PORT (default: server.addr)")
	// A flag, like --addr, so that the instances of one systemd template
	// (contrib/bothy@.service) each get their own from the instance name,
	// which is the port.
	metricsAddr := c.fs.String("metrics-addr", "", "listen address HOST:PORT of /metrics (default: metrics.addr)")
	if err := c.fs.Parse(args); err != nil {
		return flagErr(err)
	}
	cfg, err := c.load()
	if err != nil {
		return startFailed(stderr, err)
	}
	if *addr != "" {
		if cfg, err = cfg.With(config.ServerAddr, *addr); err != nil {
			return startFailed(stderr, err)
		}
	}
	if *metricsAddr != "" {
		if cfg, err = cfg.With(config.MetricsAddr, *metricsAddr); err != nil {
			return startFailed(stderr, err)
		}
	}
	if cfg, err = stateDirectoryFiles(cfg, os.Getenv("STATE_DIRECTORY")); err != nil {
		return startFailed(stderr, err)
	}
	url, err := needURL(cfg)
	if err != nil {
		return startFailed(stderr, err)
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	return serveOn(ctx, cfg, url, stdout, stderr, nil, nil)
}

// stateDirectoryFiles keeps files under the folder systemd made for the
// service (StateDirectory=, passed as STATE_DIRECTORY, the first of a
// colon-separated list) when files.storage is not set: the unit's folder
// is the one the service may write, with the owner and mode the unit
// names. Without STATE_DIRECTORY the default stands.
func stateDirectoryFiles(cfg *config.Config, state string) (*config.Config, error) {
	dir, _, _ := strings.Cut(state, ":")
	if dir == "" || cfg.IsSet(config.FilesStorage) {
		return cfg, nil
	}
	return cfg.With(config.FilesStorage, "file://"+filepath.ToSlash(filepath.Join(dir, "files")))
}

// startFailed writes a start that failed before the configured logger
// existed (the configuration itself was wrong) as the JSON stopped line
// every other end of serve writes, and returns the error as logged.
func startFailed(stderr io.Writer, err error) error {
	slog.New(slog.NewJSONHandler(stderr, nil)).Error("stopped", "error", err.Error(), "exit_code", 1)
	return loggedError{err}
}

// serveOn migrates the database at url (unless database.auto_migrate is
// off), assembles the server and serves until ctx ends, then drains. Every
// line it writes to stderr is JSON through the configured logger, which is
// also the process's default logger, so library and net/http messages come
// out the same way. announce, when set, runs once the listener is open;
// actAs are the principals the playground offers (bothy dev only).
func serveOn(ctx context.Context, cfg *config.Config, url string, stdout, stderr io.Writer, announce func(base string), actAs []playground.Principal) error {
	log, err := newLogger(cfg, stderr)
	if err != nil {
		return startFailed(stderr, err)
	}
	slog.SetDefault(log)
	stopHUP := ignoreHangup(log)
	defer stopHUP()
	if err := serveLogged(ctx, cfg, url, log, stdout, announce, actAs); err != nil {
		log.Error("stopped", "error", err.Error(), "exit_code", 1)
		return loggedError{err}
	}
	log.Info("stopped", "exit_code", 0)
	return nil
}

// ignoreHangup logs and otherwise ignores SIGHUP: Bothy reads its
// configuration only at start, and a hangup from a closing terminal or a
// reload by habit must not kill requests in flight.
func ignoreHangup(log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				log.Info("SIGHUP received and ignored: the configuration is read only at start; restart to change it")
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

func serveLogged(ctx context.Context, cfg *config.Config, url string, log *slog.Logger, stdout io.Writer, announce func(base string), actAs []playground.Principal) error {
	in := version.Get()
	log.Info("starting", "version", in.Version, "revision", in.Revision, "go_version", in.GoVersion)
	if cfg.Bool(config.DatabaseAutoMigrate) {
		applied, err := db.MigrateReport(ctx, url)
		if err != nil {
			return err
		}
		for _, m := range applied {
			log.Info("migration applied", "version", m.Version, "name", m.Name, "duration_ms", m.Duration.Milliseconds())
		}
	}
	// Statement spans only when tracing is on: off, the pool has no tracer.
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: cfg.Int(config.DatabaseMaxConns), PoolerMode: cfg.Bool(config.DatabasePoolerMode),
		Spans: tracing.Enabled(cfg)})
	if err != nil {
		return err
	}
	defer pool.Close()
	compat, err := db.Compat(ctx, pool)
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	schema := compat.Schema
	switch compat.Case {
	case db.SchemaBehind:
		log.Warn("the database schema is behind this binary; /readyz answers migrations_pending until bothy migrate runs",
			"schema_version", schema, "needed_version", compat.Binary)
	case db.SchemaNewer:
		log.Error("the database schema is newer than this binary can serve; /readyz answers schema_newer: upgrade this binary",
			"schema_version", schema, "binary_version", compat.Binary, "blocking_migrations", compat.Blocking)
	case db.SchemaNewerServable:
		log.Info("the database schema is newer than this binary by expand steps only; serving it",
			"schema_version", schema, "binary_version", compat.Binary)
	case db.SchemaCurrent:
		// The schema is this binary's: nothing to say.
	}
	srv, err := server.New(server.Deps{Config: cfg, Pool: pool, DatabaseURL: url, Logger: log, PlaygroundActAs: actAs})
	if err != nil {
		return err
	}
	if ok, err := srv.Identity.HasOwner(ctx); err == nil && !ok {
		log.WarnContext(ctx, "no owner exists yet: create one with bothy admin create-owner --handle H --display-name N")
	}
	ln, err := net.Listen("tcp", cfg.String(config.ServerAddr))
	if err != nil {
		return fmt.Errorf("server.addr: %w", err)
	}
	base := "http://" + ln.Addr().String()
	// The one start-up line of a server is this JSON line on stderr (url
	// is where the playground, /graphql and /api/v1 are); only bothy dev
	// prints a banner for a person at a terminal (announce).
	log.Info("serving", "version", in.Version, "address", ln.Addr().String(), "url", base, "schema_version", schema,
		"metrics_address", cfg.String(config.MetricsAddr))
	if announce != nil {
		announce(base)
	}
	return srv.Serve(ctx, ln)
}

func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newFlags("dev", "Runs the development server. Without database.url it starts an embedded PostgreSQL from the\n"+
		"server binaries on this machine, keeping its data in --data, and seeds the example world once.\n"+
		"While it runs, migrate, seed and token create with the same --data use its database.\n"+
		"Only one bothy dev runs on a data folder at a time; Ctrl-C stops it (exit status 0).", stderr)
	addr := c.fs.String("addr", "", "listen address HOST:PORT (default: server.addr)")
	data := c.fs.String("data", defaultDevData, "folder of the embedded database, world.json and the running server's database.url")
	if err := c.fs.Parse(args); err != nil {
		return flagErr(err)
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	if *addr != "" {
		if cfg, err = cfg.With(config.ServerAddr, *addr); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(*data, 0o755); err != nil {
		return fmt.Errorf("--data: %w", err)
	}
	if cfg, err = devFiles(cfg, *data); err != nil {
		return err
	}
	// One dev server per data folder: a second start answers what to do and
	// never touches the running server or its database.
	lock, err := lockDevData(*data)
	if err != nil {
		return err
	}
	defer lock.release()
	ctx, stop := signalContext(ctx)
	defer stop()
	url := cfg.String(config.DatabaseURL)
	if url == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(*data, "postgres")})
		if err != nil {
			return err
		}
		defer cluster.Stop()
		if err := ensureDatabase(ctx, cluster.URL("postgres"), "bothy"); err != nil {
			return err
		}
		url = cluster.URL("bothy")
		removeURL, err := writeDevURL(*data, url)
		if err != nil {
			return err
		}
		defer removeURL()
	}
	if err := db.Migrate(ctx, url); err != nil {
		return err
	}
	worldFile := filepath.Join(*data, "world.json")
	w, err := loadOrSeed(ctx, cfg, url, worldFile)
	if err != nil {
		return err
	}
	return serveOn(ctx, cfg, url, stdout, stderr, func(base string) {
		lock.announce(base)
		printBanner(stdout, base, url, worldFile, w)
	}, actAs(w))
}

// devFiles sets the development defaults of files, unless the developer
// set the keys: files in the data folder (not /var/lib/bothy/files), and
// files served without a scanner (files.require_scan false), since a
// development machine has no clamd.
func devFiles(cfg *config.Config, data string) (*config.Config, error) {
	var err error
	if !cfg.IsSet(config.FilesStorage) {
		abs, aerr := filepath.Abs(filepath.Join(data, "files"))
		if aerr != nil {
			return nil, fmt.Errorf("--data: %w", aerr)
		}
		if cfg, err = cfg.With(config.FilesStorage, "file://"+filepath.ToSlash(abs)); err != nil {
			return nil, err
		}
	}
	if !cfg.IsSet(config.FilesRequireScan) {
		cfg, err = cfg.With(config.FilesRequireScan, "false")
	}
	return cfg, err
}

// ensureDatabase creates database name on the server at adminURL if absent.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	pool, err := db.Open(ctx, db.Options{URL: adminURL, MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = pool.Exec(ctx, "CREATE DATABASE "+name)
	return err
}

// loadOrSeed returns the world of worldFile, seeding the example world first
// when the database holds no principal yet.
func loadOrSeed(ctx context.Context, cfg *config.Config, url, worldFile string) (*world.World, error) {
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: 2})
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	n, err := identity.NewService(pool, clock.Real{}).CountPrincipals(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		data, err := os.ReadFile(worldFile)
		if err != nil {
			return nil, fmt.Errorf("the database is seeded but %s is unreadable (%w): remove the data folder to start afresh", worldFile, err)
		}
		var w world.World
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, fmt.Errorf("%s: %w", worldFile, err)
		}
		return &w, nil
	}
	w, err := buildWorld(ctx, cfg, pool, url)
	if err != nil {
		return nil, err
	}
	data, _ := json.MarshalIndent(w, "", "  ")
	if err := os.WriteFile(worldFile, data, 0o600); err != nil {
		return nil, err
	}
	return w, nil
}

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	status := len(args) > 0 && args[0] == "status"
	if status {
		args = args[1:]
	}
	name, summary := "migrate", "Applies pending migrations to the database of database.url (safe with several replicas).\n"+
		"It exits with status 4 when the schema is newer than this binary can serve (a rollback past a\n"+
		"contract migration): the binary would not become ready on it, so the migration step fails."
	if status {
		name, summary = "migrate status", "Lists the migrations of this binary, applied or pending, on the database of database.url.\n"+
			"It says whether this binary serves the schema (current, behind, newer by expand steps only, or\n"+
			"newer by steps it cannot serve). With --check the exit status says it: 0 served, 3 migrations\n"+
			"pending (run bothy migrate), 4 the schema is newer than this binary can serve, 1 the status\n"+
			"could not be read, 2 a usage error. With --rollback-to N it says instead whether an older binary,\n"+
			"whose newest migration is N, serves the schema (0 it does, 4 it does not: restore a backup),\n"+
			"from the requirements this binary's migrations recorded; binaries before migration 13 cannot\n"+
			"tell that themselves and serve any schema."
	}
	c := newFlags(name, summary+"\nWhen database.url is empty it uses the database of the bothy dev running on --data.", stderr)
	data := c.withDevData()
	check, rollbackTo := new(bool), new(int64)
	if status {
		check = c.fs.Bool("check", false, "exit with status 3 while migrations are pending (0 when the schema is current)")
		rollbackTo = c.fs.Int64("rollback-to", 0, "the newest migration `N` of an older binary (1.0.0: 8): say whether it serves the schema (with --check: exit status 4 when not)")
	}
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err.Error()}
	}
	if *rollbackTo < 0 {
		return usageError{fmt.Sprintf("--rollback-to %d: want the number of a migration (1 or more)", *rollbackTo)}
	}
	if c.fs.NArg() > 0 {
		// Anything else (down, redo, a typo) must not run the forward
		// migrations by accident.
		return usageError{fmt.Sprintf("unknown migrate command %q\nusage: bothy migrate [--config FILE] | bothy migrate status [--config FILE]", c.fs.Arg(0))}
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	url, err := databaseURL(cfg, *data)
	if err != nil {
		return err
	}
	if !status {
		return migrateApply(ctx, stdout, url)
	}
	return migrateStatus(ctx, stdout, url, *rollbackTo, *check)
}

// migrateApply applies the pending migrations to url and says what it did;
// on a schema newer than this binary can serve it fails with exit status 4.
func migrateApply(ctx context.Context, stdout io.Writer, url string) error {
	applied, err := db.MigrateReport(ctx, url)
	if err != nil {
		return err
	}
	for _, m := range applied {
		fmt.Fprintf(stdout, "applied %05d %s (%s)\n", m.Version, m.Name, m.Duration.Round(time.Millisecond))
	}
	if len(applied) > 0 {
		return nil
	}
	compat, err := compatOf(ctx, url, db.EmbeddedVersion())
	if err != nil {
		return err
	}
	switch compat.Case {
	case db.SchemaNewer:
		// Not a success: the binary would stay unready on this schema,
		// and a deployment's migration step (a Kubernetes Job, an
		// ExecStartPre) that exits 0 would let the rollback proceed
		// to replicas that never serve.
		fmt.Fprintf(stdout, "nothing to apply: the schema (%d) is newer than this binary (%d) and has migrations it cannot serve (%v)\n",
			compat.Schema, compat.Binary, compat.Blocking)
		return exitStatus{code: exitSchemaNewer, msg: fmt.Sprintf("the schema (%d) is newer than this binary (%d) can serve (migrations %v): "+
			"it would answer /readyz schema_newer; upgrade the binary, or restore the backup taken before those migrations (exit status %d)",
			compat.Schema, compat.Binary, compat.Blocking, exitSchemaNewer)}
	case db.SchemaNewerServable:
		fmt.Fprintf(stdout, "nothing to apply: the schema (%d) is newer than this binary (%d) by expand steps only\n", compat.Schema, compat.Binary)
	default:
		fmt.Fprintln(stdout, "the schema is current")
	}
	return nil
}

// migrateStatus lists the migrations of url, applied or pending, and says
// whether this binary (or, with rollbackTo, an older one) serves the
// schema; with check the exit status says it too.
func migrateStatus(ctx context.Context, stdout io.Writer, url string, rollbackTo int64, check bool) error {
	list, err := db.Status(ctx, url)
	if err != nil {
		return err
	}
	pending := 0
	for _, m := range list {
		if m.Applied {
			fmt.Fprintf(stdout, "applied  %05d %s  %s\n", m.Version, m.Name, m.AppliedAt.UTC().Format(time.RFC3339))
		} else {
			pending++
			fmt.Fprintf(stdout, "pending  %05d %s\n", m.Version, m.Name)
		}
	}
	fmt.Fprintf(stdout, "%d applied, %d pending\n", len(list)-pending, pending)
	if rollbackTo > 0 {
		return rollbackStatus(ctx, stdout, url, rollbackTo, check)
	}
	compat, err := compatOf(ctx, url, db.EmbeddedVersion())
	if err != nil {
		return err
	}
	switch compat.Case {
	case db.SchemaCurrent:
		fmt.Fprintln(stdout, "the schema is current: this binary serves it")
	case db.SchemaBehind:
		fmt.Fprintln(stdout, "the schema is behind this binary: run bothy migrate (until then /readyz answers migrations_pending)")
	case db.SchemaNewerServable:
		fmt.Fprintf(stdout, "the schema (%d) is newer than this binary (%d) by expand steps only: this binary serves it\n", compat.Schema, compat.Binary)
	case db.SchemaNewer:
		fmt.Fprintf(stdout, "the schema (%d) is newer than this binary (%d) by migrations it cannot serve (%v): it refuses (/readyz schema_newer); upgrade it\n",
			compat.Schema, compat.Binary, compat.Blocking)
	}
	if check && pending > 0 {
		return exitStatus{code: exitPending, msg: fmt.Sprintf("%d migrations pending: run bothy migrate (exit status %d)", pending, exitPending)}
	}
	if check && compat.Case == db.SchemaNewer {
		return exitStatus{code: exitSchemaNewer, msg: fmt.Sprintf("the schema is newer than this binary can serve (exit status %d)", exitSchemaNewer)}
	}
	return nil
}

// compatOf opens a short connection to url and decides how a binary whose
// newest migration is binary stands to its schema (db.CompatOf).
func compatOf(ctx context.Context, url string, binary int64) (db.CompatState, error) {
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: 1})
	if err != nil {
		return db.CompatState{}, err
	}
	defer pool.Close()
	return db.CompatOf(ctx, pool, binary)
}

// rollbackStatus says whether an older binary, whose newest migration is
// target, serves the schema of url, by the requirements that this
// binary's migrations recorded. It is asked of the newer binary because
// the older one may predate schema_compat (1.0.0 embeds migration 8) and
// would serve any schema without a word; with check a rollback that is
// not safe exits with exitSchemaNewer, so a script can stop before it.
func rollbackStatus(ctx context.Context, stdout io.Writer, url string, target int64, check bool) error {
	compat, err := compatOf(ctx, url, target)
	if err != nil {
		return err
	}
	switch compat.Case {
	case db.SchemaCurrent:
		fmt.Fprintf(stdout, "rollback to a binary of migration %d: safe, it is the schema's version\n", target)
	case db.SchemaBehind:
		fmt.Fprintf(stdout, "rollback to a binary of migration %d: not a rollback, the schema (%d) is older; that binary migrates it\n", target, compat.Schema)
	case db.SchemaNewerServable:
		fmt.Fprintf(stdout, "rollback to a binary of migration %d: safe, the schema (%d) is newer by expand steps only\n", target, compat.Schema)
	case db.SchemaNewer:
		fmt.Fprintf(stdout, "rollback to a binary of migration %d: not safe, the schema (%d) has migrations it cannot serve (%v); "+
			"restore the backup taken before them instead (docs/operations.md, Upgrades)\n", target, compat.Schema, compat.Blocking)
		if check {
			return exitStatus{code: exitSchemaNewer, msg: fmt.Sprintf("a binary of migration %d cannot serve this schema (exit status %d)", target, exitSchemaNewer)}
		}
	}
	return nil
}

func cmdSeed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newFlags("seed", "Builds the example world on the database of database.url (migrating it first) through the admin\n"+
		"operations. On a database that already holds the world it says so and changes nothing.\n"+
		"When database.url is empty it uses the database of the bothy dev running on --data.", stderr)
	asJSON := c.fs.Bool("json", false, "print the world's ids and tokens as JSON")
	data := c.withDevData()
	if err := c.fs.Parse(args); err != nil {
		return flagErr(err)
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	url, err := databaseURL(cfg, *data)
	if err != nil {
		return err
	}
	if err := db.Migrate(ctx, url); err != nil {
		return err
	}
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	w, err := buildWorld(ctx, cfg, pool, url)
	if errors.Is(err, world.ErrExists) {
		fmt.Fprintln(stdout, "the example world is already there; nothing changed (its tokens were printed when it was built)")
		return nil
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(w)
	}
	fmt.Fprintln(stdout, "example world built; rerun with --json for ids and tokens")
	return nil
}

// agentTokenEnv is read when --token is not given, so the token need not
// appear in the process list.
const agentTokenEnv = "BOTHY_AGENT_TOKEN"

// modelKeyEnv holds the API key of the model server. It is read from the
// environment only: a flag would show the key in the process list and in
// shell histories.
const modelKeyEnv = "BOTHY_MODEL_API_KEY"

// The variables that bothy agent run reads for a flag that is absent.
const (
	serverEnv       = "BOTHY_SERVER"
	modelEnv        = "BOTHY_MODEL"
	modelBaseURLEnv = "BOTHY_MODEL_BASE_URL"
	modelNameEnv    = "BOTHY_MODEL_NAME"
	toolsEnv        = "BOTHY_TOOLS"
)

// cmdAgentRun runs the reference agent adapter (sdk/agent) against a
// server over its public GraphQL API until a signal arrives, or for one
// invocation with --once. It logs JSON to stderr: ids, event types, outcomes,
// trust counts and error codes, never content or tokens.
func cmdAgentRun(ctx context.Context, args []string, stderr io.Writer) error {
	f, err := parseAgentRunFlags(args, stderr)
	if err != nil {
		// --help printed the help: a success.
		return flagErr(err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	toolList, err := f.loadTools(log)
	if err != nil {
		return err
	}
	if f.runnerCmd != "" {
		return f.runRunner(ctx, log, stderr)
	}
	if f.files && f.model != "echo" {
		toolList = append(toolList, agent.AttachFileTool())
	}
	m, err := f.newModel(log, toolList)
	if err != nil {
		return err
	}
	client, err := agent.NewClient(f.serverURL, f.token, agent.ClientOptions{})
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{Client: client, Model: m, Once: f.once, Logger: log, Transport: f.transport, Outbox: f.outbox, MaxConcurrent: f.maxConcurrent, Live: f.live,
		ReadFiles: f.files && f.model != "echo"})
	if err != nil {
		return err
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	if err := a.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// agentRunFlags are the flags of agent run, each absent one filled from
// its environment variable where it has one.
type agentRunFlags struct {
	token, serverURL, transport, tools, outbox, runnerCmd string
	model, baseURL, modelName                             string
	once, modelStream, live, files                        bool
	maxConcurrent, maxTokens                              int
	modelTimeout                                          time.Duration
	// given holds the names of the flags on the command line, as opposed
	// to defaults and environment variables.
	given map[string]bool
}

// parseAgentRunFlags parses the flags of agent run, takes the environment
// variable of each absent flag, and refuses arguments and a missing server
// or token. After --help it returns flag.ErrHelp.
func parseAgentRunFlags(args []string, stderr io.Writer) (*agentRunFlags, error) {
	f := &agentRunFlags{given: map[string]bool{}}
	fs := flag.NewFlagSet("agent run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.token, "token", "", "API token of the agent (default: $"+agentTokenEnv+")")
	fs.StringVar(&f.serverURL, "server", "", "base URL of the Bothy server, e.g. http://127.0.0.1:8080 (required)")
	fs.BoolVar(&f.once, "once", false, "handle exactly one invocation, then exit")
	fs.StringVar(&f.transport, "transport", agent.TransportPoll, "how to read the agent stream: poll (long poll over HTTP), ws (the agentEvents subscription over WebSocket)\nor auto (WebSocket, falling back to the long poll where the server or a proxy does not upgrade)")
	fs.BoolVar(&f.modelStream, "model-stream", false, "--model openai or anthropic: ask for the answer as server-sent events (a long answer then meets no idle timeout of a proxy)")
	fs.StringVar(&f.tools, "tools", "", "a tools file (YAML) of HTTP tools the model may call (--model openai or anthropic); consequential ones run\nwith untrusted content in play only after the person who asked approved the call (docs/adapter.md#http-tools)")
	fs.BoolVar(&f.live, "live", true, "write the model's answer into the run's live box as it streams, so readers see it grow\n(--model openai and anthropic then stream their answers); --live=false turns it off")
	fs.IntVar(&f.maxConcurrent, "max-concurrent", 0, "most runs the model works on at once (0: no bound); further runs are claimed and wait their turn")
	fs.StringVar(&f.model, "model", "echo", "the model that answers: echo (a summary of the run context, no model service),\nopenai (any OpenAI-compatible chat completions server: OpenAI, Ollama, vLLM, llama.cpp, LM Studio)\nor anthropic (Anthropic's Messages API, streamed)")
	fs.StringVar(&f.baseURL, "base-url", "", "--model openai: API root of the model server, the part before /chat/completions,\ne.g. https://api.openai.com/v1 or http://localhost:11434/v1 (Ollama);\n--model anthropic: API root, default https://api.anthropic.com")
	fs.StringVar(&f.modelName, "model-name", "", "--model openai or anthropic: the model to ask, e.g. gpt-4o-mini, llama3.2 or claude-sonnet-4-5")
	fs.DurationVar(&f.modelTimeout, "model-timeout", 120*time.Second, "--model openai or anthropic: longest time for one answer, retries included")
	fs.StringVar(&f.outbox, "outbox", "", "a folder where each answer is kept from before it is sent until the server has it;\nanswers a stopped process left there are sent again at the next start (default: none)")
	fs.StringVar(&f.runnerCmd, "runner", "", "a shell command started once per run instead of a model: an MCP-capable agent runtime that answers\nthrough "+
		"the server's /mcp with the run token it finds in $BOTHY_MCP_TOKEN (URL in $BOTHY_MCP_URL, run in $BOTHY_RUN_ID,\nthe trust-aware prompt on its stdin); "+
		"exit 0 having answered completes the run (docs/mcp.md#runner)")
	fs.BoolVar(&f.files, "files", true, "--model openai or anthropic: read the text of files attached to the run's context into the prompt, as data\n(it lowers the run's in-play trust), and offer the model the tool attach_file, which attaches a file to the answer\n(the agent needs the capability files_out); --files=false turns both off")
	fs.IntVar(&f.maxTokens, "model-max-tokens", 0, "--model openai or anthropic: max tokens of each answer (0: the server's default for openai, 1024 for anthropic)")
	fs.Usage = func() { agentRunUsage(fs, stderr) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("agent run takes no arguments, got %q", fs.Arg(0))
	}
	// A flag that is absent takes its environment variable.
	fs.Visit(func(fl *flag.Flag) { f.given[fl.Name] = true })
	for _, v := range []struct {
		flag, env string
		to        *string
	}{{"token", agentTokenEnv, &f.token}, {"server", serverEnv, &f.serverURL}, {"model", modelEnv, &f.model},
		{"base-url", modelBaseURLEnv, &f.baseURL}, {"model-name", modelNameEnv, &f.modelName}, {"tools", toolsEnv, &f.tools}} {
		if e := os.Getenv(v.env); !f.given[v.flag] && e != "" {
			*v.to = e
		}
	}
	if f.token == "" || f.serverURL == "" {
		return nil, errors.New("agent run needs --server (or $" + serverEnv + ") and --token (or $" + agentTokenEnv + ")")
	}
	return f, nil
}

// agentRunUsage writes the help of agent run: its synopsis, the
// environment variables that stand in for absent flags, and the flags.
func agentRunUsage(fs *flag.FlagSet, stderr io.Writer) {
	fmt.Fprintf(stderr, "Usage: bothy agent run --token T --server URL [--once] [--transport poll|ws|auto] [--live=false] [--model echo|openai|anthropic --base-url URL --model-name NAME | --runner COMMAND]\n\n"+
		"Runs the reference agent adapter: it long-polls the agent's events, reads each run's context,\n"+
		"starts the run, answers with the model and finishes the run.\n\n"+
		"Environment (each flag that is absent takes its variable):\n"+
		"  %-21s --server\n"+
		"  %-21s --token, the agent's API token\n"+
		"  %-21s --model\n"+
		"  %-21s --base-url\n"+
		"  %-21s --model-name\n"+
		"  %-21s --tools\n"+
		"  %-21s the API key of the model server (--model openai), sent as a bearer token;\n"+
		"  %-21s unset sends none (local servers such as Ollama need none); there is no flag for it\n\nFlags:\n",
		serverEnv, agentTokenEnv, modelEnv, modelBaseURLEnv, modelNameEnv, toolsEnv, modelKeyEnv, "")
	fs.PrintDefaults()
}

// loadTools loads the HTTP tools file of --tools (or its variable). A tools
// file in the environment is ignored with a warning by the echo model,
// which calls no tools; named with the flag it is an error.
func (f *agentRunFlags) loadTools(log *slog.Logger) ([]agent.Tool, error) {
	if f.tools != "" && f.model == "echo" && !f.given["tools"] {
		// Only the flag is an error: a tools file in the environment serves
		// the adapters that can use it.
		log.Warn("tools file ignored: the echo model calls no tools", "variable", toolsEnv)
		f.tools = ""
	}
	if f.tools == "" {
		return nil, nil
	}
	if f.model == "echo" {
		return nil, errors.New("--tools needs --model openai or anthropic (the echo model calls no tools)")
	}
	return httptool.Load(f.tools, httptool.Options{})
}

// runRunner hands each run to the command of --runner, which answers
// itself: the model flags do not apply.
func (f *agentRunFlags) runRunner(ctx context.Context, log *slog.Logger, stderr io.Writer) error {
	if f.given["model"] || f.tools != "" || f.baseURL != "" || f.modelName != "" {
		return errors.New("--runner answers with its command: --model, --tools, --base-url and --model-name do not apply")
	}
	return runRunner(ctx, log, f.serverURL, f.token, f.runnerCmd, agent.Config{Once: f.once, Logger: log, Transport: f.transport, MaxConcurrent: f.maxConcurrent}, stderr)
}

// newModel returns the model of --model, which may call tools.
func (f *agentRunFlags) newModel(log *slog.Logger, tools []agent.Tool) (agent.Model, error) {
	switch f.model {
	case "echo":
		if f.baseURL != "" || f.modelName != "" {
			return nil, errors.New("--base-url and --model-name belong to --model openai and anthropic")
		}
		return agent.EchoModel{}, nil
	case "openai":
		return f.openAIModel(log, tools)
	case "anthropic":
		return f.anthropicModel(log, tools)
	default:
		return nil, fmt.Errorf("--model %q is unknown; built in: echo, openai, anthropic", f.model)
	}
}

// openAIModel returns the model of --model openai: an OpenAI-compatible
// chat completions server at --base-url.
func (f *agentRunFlags) openAIModel(log *slog.Logger, tools []agent.Tool) (agent.Model, error) {
	if f.baseURL == "" || f.modelName == "" {
		return nil, errors.New("--model openai needs --base-url and --model-name")
	}
	if err := f.checkModelLimits(); err != nil {
		return nil, err
	}
	om, err := openai.New(openai.Config{BaseURL: f.baseURL, Model: f.modelName, APIKey: os.Getenv(modelKeyEnv),
		Timeout: f.modelTimeout, MaxTokens: f.maxTokens, Logger: log.With("component", "model"), Stream: f.modelStream || f.live, Tools: tools})
	if err != nil {
		return nil, err
	}
	return om, nil
}

// anthropicModel returns the model of --model anthropic: Anthropic's
// Messages API, at --base-url when it is set.
func (f *agentRunFlags) anthropicModel(log *slog.Logger, tools []agent.Tool) (agent.Model, error) {
	if f.modelName == "" {
		return nil, errors.New("--model anthropic needs --model-name")
	}
	if err := f.checkModelLimits(); err != nil {
		return nil, err
	}
	am, err := anthropic.New(anthropic.Config{BaseURL: f.baseURL, Model: f.modelName, APIKey: os.Getenv(modelKeyEnv),
		Timeout: f.modelTimeout, MaxTokens: f.maxTokens, Logger: log.With("component", "model"), Stream: f.modelStream || f.live, Tools: tools})
	if err != nil {
		return nil, err
	}
	return am, nil
}

// checkModelLimits refuses a --model-timeout that is not positive and a
// negative --model-max-tokens.
func (f *agentRunFlags) checkModelLimits() error {
	if f.modelTimeout <= 0 || f.maxTokens < 0 {
		return errors.New("--model-timeout must be positive and --model-max-tokens at least 0")
	}
	return nil
}

// runRunner runs the adapter with a runner (sdk/runner): each run goes to
// command, which answers through /mcp on a run token.
func runRunner(ctx context.Context, log *slog.Logger, serverURL, token, command string, cfg agent.Config, stderr io.Writer) error {
	client, err := agent.NewClient(serverURL, token, agent.ClientOptions{})
	if err != nil {
		return err
	}
	cfg.Client, cfg.Token, cfg.Server, cfg.Holder = client, token, serverURL, agent.NewHolder()
	h, err := runner.Handler(runner.Config{Command: command, Client: client, Server: serverURL, Holder: cfg.Holder, Output: stderr})
	if err != nil {
		return err
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	if err := agent.Run(ctx, cfg, h); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func flagErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// buildWorld builds the example world through the services of an assembled
// server (the same wiring as serving), on the database of pool.
func buildWorld(ctx context.Context, cfg *config.Config, pool *db.Pool, url string) (*world.World, error) {
	srv, err := server.New(server.Deps{Config: cfg, Pool: pool, DatabaseURL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	return world.Build(ctx, world.Of(srv.Modules()))
}
