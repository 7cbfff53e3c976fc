// Command bothy is the Bothy server: a team chat in which AI agents are
// members like people. Subcommands: serve, dev, migrate, seed, token create,
// agent run, config markdown. main only parses flags and calls
// internal/server (or internal/adapter for agent run).
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
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/adapter"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgcluster"
	"bothy.example.com/bothy/internal/server"
	"bothy.example.com/bothy/internal/world"
)

const usage = `bothy: the Bothy team chat server

Usage:
  bothy serve   [--config FILE] [--addr HOST:PORT]     run the server on database.url
  bothy dev     [--config FILE] [--addr HOST:PORT] [--data DIR]
                                                        run the server on the embedded development database
  bothy migrate [--config FILE]                         apply pending migrations to database.url
  bothy seed    [--config FILE] [--json]                build the example world on database.url
  bothy admin ...                                       administer on database.url: create-owner, principal create|disable|enable|list,
                                                        token create|list|revoke (bothy admin --help)
  bothy token create --handle H [--config FILE] [--label L] [--ttl D]
                                                        issue a token for the principal with handle H (= bothy admin token create)
  bothy config markdown                                 print docs/configuration.md
  bothy agent run --token T --server URL [--once] [--transport poll|ws] [--model echo|openai --base-url URL --model-name NAME]
                                                        run the reference agent adapter for the agent of token T

Run "bothy <command> --help" for the flags of a command.
`

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bothy:", err)
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "dev":
		return cmdDev(ctx, args[1:], stdout, stderr)
	case "migrate":
		return cmdMigrate(ctx, args[1:], stderr)
	case "seed":
		return cmdSeed(ctx, args[1:], stdout, stderr)
	case "admin":
		return cmdAdmin(ctx, args[1:], stdout, stderr)
	case "token":
		if len(args) < 2 || args[1] != "create" {
			return usagef("usage: bothy token create --handle H")
		}
		return adminTokenCreate(ctx, "token create", args[2:], stdout, stderr)
	case "agent":
		if len(args) < 2 || args[1] != "run" {
			return errors.New("usage: bothy agent run --token T --server URL [--once] [--transport poll|ws] [--model echo|openai --base-url URL --model-name NAME]")
		}
		return cmdAgentRun(ctx, args[2:], stderr)
	case "config":
		if len(args) < 2 || args[1] != "markdown" {
			return errors.New("usage: bothy config markdown")
		}
		fmt.Fprint(stdout, config.Markdown())
		return nil
	default:
		return fmt.Errorf("unknown command %q\n\n%s", args[0], usage)
	}
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

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.String(config.LogLevel))); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))
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
	c := newFlags("serve", "Runs the server on the database of database.url, applying pending migrations first.", stderr)
	addr := c.fs.String("addr", "", "listen address HOST:PORT (default: server.addr)")
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
	url, err := needURL(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	return serveOn(ctx, cfg, url, stdout, stderr, nil)
}

// serveOn migrates the database at url, assembles the server and serves
// until ctx ends. announce, when set, runs once the listener is open.
func serveOn(ctx context.Context, cfg *config.Config, url string, stdout, stderr io.Writer, announce func(base string)) error {
	log := newLogger(cfg, stderr)
	if err := db.Migrate(ctx, url); err != nil {
		return err
	}
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: cfg.Int(config.DatabaseMaxConns)})
	if err != nil {
		return err
	}
	defer pool.Close()
	srv, err := server.New(server.Deps{Config: cfg, Pool: pool, DatabaseURL: url, Logger: log})
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
	if announce != nil {
		announce(base)
	} else {
		fmt.Fprintf(stdout, "Bothy listens on %s\n  playground  %s/\n  GraphQL     %s/graphql\n  REST        %s/api/v1/ (OpenAPI: %s/api/openapi.yaml)\n", base, base, base, base, base)
	}
	return srv.Serve(ctx, ln)
}

func cmdDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newFlags("dev", "Runs the development server. Without database.url it starts an embedded PostgreSQL from the\nserver binaries on this machine, keeping its data in --data, and seeds the example world once.", stderr)
	addr := c.fs.String("addr", "", "listen address HOST:PORT (default: server.addr)")
	data := c.fs.String("data", ".bothy-dev", "folder of the embedded database and of world.json")
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
		fmt.Fprintf(stdout, "Bothy development server on %s\n", base)
		fmt.Fprintf(stdout, "  playground  %s/   (set the header Authorization: Bearer <token>)\n", base)
		fmt.Fprintf(stdout, "  GraphQL     %s/graphql\n  REST        %s/api/v1/   OpenAPI %s/api/openapi.yaml\n", base, base, base)
		fmt.Fprintf(stdout, "  world       %s\n\nTokens of the example world:\n", worldFile)
		for _, h := range []string{"robin", "alex", "sam", "writer", "lotse", "texter", "feedbot"} {
			if p, ok := w.Principals[h]; ok {
				fmt.Fprintf(stdout, "  %-8s %-5s %s\n", h, p.Kind, p.Token)
			}
		}
	})
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
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM principals").Scan(&n); err != nil {
		return nil, err
	}
	if n > 0 {
		data, err := os.ReadFile(worldFile)
		if err != nil {
			return nil, fmt.Errorf("the database is seeded but %s is unreadable (%v): remove the data folder to start afresh", worldFile, err)
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

func cmdMigrate(ctx context.Context, args []string, stderr io.Writer) error {
	c := newFlags("migrate", "Applies pending migrations to the database of database.url (safe with several replicas).", stderr)
	if err := c.fs.Parse(args); err != nil {
		return flagErr(err)
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	url, err := needURL(cfg)
	if err != nil {
		return err
	}
	return db.Migrate(ctx, url)
}

func cmdSeed(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newFlags("seed", "Builds the example world on the database of database.url (migrating it first) through the admin\noperations. On a database that already holds the world it says so and changes nothing.", stderr)
	asJSON := c.fs.Bool("json", false, "print the world's ids and tokens as JSON")
	if err := c.fs.Parse(args); err != nil {
		return flagErr(err)
	}
	cfg, err := c.load()
	if err != nil {
		return err
	}
	url, err := needURL(cfg)
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

// cmdAgentRun runs the reference agent adapter (internal/adapter) against a
// server over its public GraphQL API until a signal arrives, or for one
// invocation with --once. It logs JSON to stderr: ids, event types, outcomes,
// trust counts and error codes, never content or tokens.
func cmdAgentRun(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("agent run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	token := fs.String("token", "", "API token of the agent (default: $"+agentTokenEnv+")")
	serverURL := fs.String("server", "", "base URL of the Bothy server, e.g. http://127.0.0.1:8080 (required)")
	once := fs.Bool("once", false, "handle exactly one invocation, then exit")
	transport := fs.String("transport", adapter.TransportPoll, "how to read the agent stream: poll (long poll over HTTP) or ws (the agentEvents subscription over WebSocket)")
	model := fs.String("model", "echo", "the model that answers: echo (a summary of the run context, no model service) or\nopenai (any OpenAI-compatible chat completions server: OpenAI, Ollama, vLLM, llama.cpp, LM Studio)")
	baseURL := fs.String("base-url", "", "--model openai: API root of the model server, the part before /chat/completions,\ne.g. https://api.openai.com/v1 or http://localhost:11434/v1 (Ollama)")
	modelName := fs.String("model-name", "", "--model openai: the model to ask, e.g. gpt-4o-mini or llama3.2")
	modelTimeout := fs.Duration("model-timeout", 120*time.Second, "--model openai: longest time for one answer, retries included")
	maxTokens := fs.Int("model-max-tokens", 0, "--model openai: max_tokens of each request (0: the server's default)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bothy agent run --token T --server URL [--once] [--transport poll|ws] [--model echo|openai --base-url URL --model-name NAME]\n\n"+
			"Runs the reference agent adapter: it long-polls the agent's events, reads each run's context,\n"+
			"starts the run, answers with the model and finishes the run.\n\n"+
			"Environment:\n"+
			"  %-21s the agent's API token when --token is not given\n"+
			"  %-21s the API key of the model server (--model openai), sent as a bearer token;\n"+
			"  %-21s unset sends none (local servers such as Ollama need none); there is no flag for it\n\nFlags:\n",
			agentTokenEnv, modelKeyEnv, "")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("agent run takes no arguments, got %q", fs.Arg(0))
	}
	if *token == "" {
		*token = os.Getenv(agentTokenEnv)
	}
	if *token == "" || *serverURL == "" {
		return errors.New("agent run needs --server and --token (or $" + agentTokenEnv + ")")
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var m adapter.Model
	switch *model {
	case "echo":
		if *baseURL != "" || *modelName != "" {
			return errors.New("--base-url and --model-name belong to --model openai")
		}
		m = adapter.EchoModel{}
	case "openai":
		if *baseURL == "" || *modelName == "" {
			return errors.New("--model openai needs --base-url and --model-name")
		}
		if *modelTimeout <= 0 || *maxTokens < 0 {
			return errors.New("--model-timeout must be positive and --model-max-tokens at least 0")
		}
		om, err := adapter.NewOpenAIModel(adapter.OpenAIConfig{BaseURL: *baseURL, Model: *modelName, APIKey: os.Getenv(modelKeyEnv),
			Timeout: *modelTimeout, MaxTokens: *maxTokens, Logger: log.With("component", "model")})
		if err != nil {
			return err
		}
		m = om
	default:
		return fmt.Errorf("--model %q is unknown; built in: echo, openai", *model)
	}
	client, err := adapter.NewClient(*serverURL, *token, adapter.ClientOptions{})
	if err != nil {
		return err
	}
	a, err := adapter.New(adapter.Config{Client: client, Model: m, Once: *once, Logger: log, Transport: *transport})
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

func flagErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

// buildWorld builds the example world through the services of an assembled
// server (the same wiring as serving), on the database of pool.
func buildWorld(ctx context.Context, cfg *config.Config, pool *pgxpool.Pool, url string) (*world.World, error) {
	srv, err := server.New(server.Deps{Config: cfg, Pool: pool, DatabaseURL: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	return world.Build(ctx, srv.World())
}
