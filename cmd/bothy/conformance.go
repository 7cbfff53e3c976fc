package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"bothy.example.com/bothy/internal/conformance"
)

// cmdConformance runs "bothy conformance": the kit of internal/conformance
// against the adapter command of --adapter.
func cmdConformance(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	adapter := fs.String("adapter", "", "the shell command that runs the adapter under test (required); it reads BOTHY_SERVER,\nBOTHY_AGENT_TOKEN, BOTHY_MODEL_BASE_URL, BOTHY_MODEL_API_KEY and BOTHY_MODEL_NAME")
	asJSON := fs.Bool("json", false, "print the verdicts as one JSON document")
	caps := fs.String("capabilities", conformance.DefaultCapabilities, "what the adapter does, comma-separated, of "+strings.Join(conformance.Capabilities(), ", ")+
		" (or none);\na scenario that needs another is reported not applicable")
	only := fs.String("only", "", "run these scenarios only (comma-separated): "+strings.Join(conformance.Names(), ", "))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bothy conformance --adapter \"COMMAND\" [--json] [--capabilities CAP[,CAP...]] [--only NAME[,NAME...]]\n\n"+
			"Starts a private Bothy server (embedded database, example world, short leases) and a fake model\n"+
			"that speaks the OpenAI chat completions and Anthropic Messages APIs, runs COMMAND as the agent\n"+
			"Lotse and checks the run contract, one scenario after the other. The exit status is 0 only\n"+
			"when every scenario passed.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if *adapter == "" || fs.NArg() > 0 {
		return usageError{"usage: bothy conformance --adapter \"COMMAND\" [--json] [--capabilities CAP[,CAP...]] [--only NAME[,NAME...]]"}
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	var progress io.Writer
	if !*asJSON {
		progress = stdout
	}
	rep, err := conformance.Run(ctx, conformance.Options{Adapter: *adapter, Only: *only, Capabilities: *caps, Progress: progress})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%d passed, %d failed, %d not applicable\n", rep.Passed, rep.Failed, rep.NotApplicable)
	}
	if rep.Failed > 0 {
		return exitStatus{code: 1, msg: fmt.Sprintf("%d of %d scenarios failed", rep.Failed, rep.Passed+rep.Failed)}
	}
	return nil
}
