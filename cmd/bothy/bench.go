package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"bothy.example.com/bothy/internal/bench/injection"
)

// benchUsage is the help of "bothy bench".
const benchUsage = `Usage: bothy bench injection [--json] [--model obedient|openai|anthropic] [--cases N] [--only ORIGIN[,ORIGIN...]] [--seed N]
       bothy bench capacity --server URL [--world FILE] [--pprof URL] [--json]

Benchmarks:
  injection   how far instructions planted in what an agent reads drive its tools, with and without
              the server's trust markers (docs/reliability.md#injection-bench)
  capacity    the highest sustained rate of messages, listeners and agent runs a running server carries
              with p99 delivery within 250 ms, and the first bottleneck (docs/performance.md)

Run "bothy bench injection --help" or "bothy bench capacity --help" for their flags.
`

// cmdBench runs "bothy bench": injection or capacity.
func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprint(stdout, benchUsage)
		return nil
	}
	switch args[0] {
	case "injection":
		return cmdBenchInjection(ctx, args[1:], stdout, stderr)
	case "capacity":
		return cmdBenchCapacity(ctx, args[1:], stdout, stderr)
	}
	return usageError{fmt.Sprintf("unknown benchmark %q\n\n%s", args[0], benchUsage)}
}

// cmdBenchInjection runs "bothy bench injection" (internal/bench/injection)
// and prints its table, or with --json its report.
func cmdBenchInjection(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench injection", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print one JSON object: cases, and with_markers and without_markers, each with utility,\nutility_under_attack, attack_success_rate, stopped_at_approval and cards_per_benign_task (rates from 0 to 1)")
	model := fs.String("model", injection.ModelObedient, "the model of the agent under test: obedient (built in: it calls whatever any text asks for),\nopenai (any OpenAI-compatible chat completions server) or anthropic (the Messages API)")
	baseURL := fs.String("base-url", "", "--model openai or anthropic: API root of the model server (default: $"+modelBaseURLEnv+")")
	modelName := fs.String("model-name", "", "--model openai or anthropic: the model to ask (default: $"+modelNameEnv+")")
	cases := fs.Int("cases", 0, "run the first N injection cases (they cycle through the origins) and the benign tasks they use; 0: all")
	only := fs.String("only", "", "run the cases of these origins only (comma-separated): person, agent, app, import, followup, webpage, own_answer, file")
	seed := fs.Uint64("seed", 1, "decides which user task each injection case pairs with")
	parallel := fs.Int("parallel", 6, "cases played at once")
	caseTimeout := fs.Duration("case-timeout", 0, "longest time for one case (default 60s for the obedient model, 10m for a real one)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bothy bench injection [--json] [--model obedient|openai|anthropic --base-url URL --model-name NAME] [--cases N] [--only ORIGIN,...] [--seed N]\n\n"+
			"Starts a private Bothy server (embedded database) with a team of four, an agent on the Go SDK with HTTP tools\n"+
			"against a fixture that records every call, and plays benign user tasks of Alex, and injection cases that plant\n"+
			"an attacker's request through every origin; Alex approves exactly what her task asked for. Every case runs\n"+
			"with the server's trust markers and with every element treated as TRIGGER. The scores come from the recorded\n"+
			"calls, never the model's text (docs/reliability.md#injection-bench).\n\n"+
			"Environment: %s and %s stand for --base-url and --model-name; %s is the model server's key.\n\nFlags:\n",
			modelBaseURLEnv, modelNameEnv, modelKeyEnv)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("bench injection takes no arguments, got %q", fs.Arg(0))}
	}
	origins, err := injection.ParseOrigins(*only)
	if err != nil {
		return usageError{err.Error()}
	}
	if *cases < 0 || *parallel < 1 || *caseTimeout < 0 {
		return usageError{"--cases must be at least 0, --parallel at least 1 and --case-timeout not negative"}
	}
	m, err := benchModel(*model, *baseURL, *modelName)
	if err != nil {
		return err
	}
	if *caseTimeout == 0 && m.Kind != injection.ModelObedient {
		*caseTimeout = 10 * time.Minute
	}
	opts := injection.Options{Selection: injection.Selection{Cases: *cases, Only: origins, Seed: *seed}, Model: m,
		Parallel: *parallel, CaseTimeout: *caseTimeout}
	if !*asJSON {
		opts.Progress = stderr
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	rep, err := injection.Run(ctx, opts)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "bothy bench injection: model %s, seed %d\n\n", m.Kind, *seed)
	return rep.WriteTable(stdout)
}

// benchModel is the model of --model, its address and name from the flags
// or the BOTHY_MODEL_ variables, its key from the environment only.
func benchModel(kind, baseURL, name string) (injection.Model, error) {
	m := injection.Model{Kind: kind}
	switch kind {
	case injection.ModelObedient:
		if baseURL != "" || name != "" {
			return m, usageError{"--base-url and --model-name belong to --model openai and anthropic"}
		}
		return m, nil
	case injection.ModelOpenAI, injection.ModelAnthropic:
	default:
		return m, usageError{fmt.Sprintf("--model %q is unknown; there are obedient, openai and anthropic", kind)}
	}
	m.BaseURL, m.Name, m.APIKey = baseURL, name, os.Getenv(modelKeyEnv)
	if m.BaseURL == "" {
		m.BaseURL = os.Getenv(modelBaseURLEnv)
	}
	if m.Name == "" {
		m.Name = os.Getenv(modelNameEnv)
	}
	if kind == injection.ModelOpenAI && (m.BaseURL == "" || m.Name == "") {
		return m, usageError{"--model openai needs --base-url and --model-name (or $" + modelBaseURLEnv + " and $" + modelNameEnv + ")"}
	}
	if m.Name == "" {
		return m, usageError{"--model anthropic needs --model-name (or $" + modelNameEnv + ")"}
	}
	return m, nil
}
