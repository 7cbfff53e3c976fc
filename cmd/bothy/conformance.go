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
	adapter := fs.String("adapter", "", "the shell command that runs the adapter under test (required), with the environment below")
	asJSON := fs.Bool("json", false, "print the verdicts as one JSON document")
	caps := fs.String("capabilities", conformance.DefaultCapabilities, "what the adapter does, comma-separated, of "+strings.Join(conformance.Capabilities(), ", ")+
		" (or none; see below);\na scenario that needs another is reported not applicable")
	only := fs.String("only", "", "run these scenarios only (comma-separated): "+strings.Join(conformance.Names(), ", "))
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: bothy conformance --adapter \"COMMAND\" [--json] [--capabilities CAP[,CAP...]] [--only NAME[,NAME...]]\n\n"+
			"Starts a private Bothy server (embedded database, example world, short leases) and a fake model\n"+
			"that speaks the OpenAI chat completions and Anthropic Messages APIs, runs COMMAND as the agent\n"+
			"Lotse and checks the run contract, one scenario after the other. It waits for the adapter's\n"+
			"first read of its event stream after every start, reports every exit of the adapter (the\n"+
			"kit's own kills as such), and ends a failure with what fixes it. An adapter that exits\n"+
			"before its first read stops the kit with its exit status and last lines. The exit status\n"+
			"is 0 only when every scenario passed.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nThe adapter's environment (set by the kit):\n")
		describe(stderr, conformance.AdapterEnvironment())
		fmt.Fprintf(stderr, "\nRead by the kit itself:\n")
		describe(stderr, conformance.KitEnvironment())
		fmt.Fprintf(stderr, "\nCapabilities (--capabilities):\n")
		describe(stderr, conformance.CapabilityLines())
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
		// What the kit saw before it stopped (an adapter that could not
		// start: its exit) is part of the answer for a script too.
		if *asJSON && rep.Error != "" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(rep)
		}
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%d passed, %d failed, %d not applicable; the adapter exited %s, %d of them not caused by the kit\n",
			rep.Passed, rep.Failed, rep.NotApplicable, countTimes(len(rep.Exits)), rep.UnexpectedExits)
	}
	if rep.Failed > 0 {
		return exitStatus{code: 1, msg: fmt.Sprintf("%d of %d scenarios failed", rep.Failed, rep.Passed+rep.Failed)}
	}
	return nil
}

// describe writes one line per name of ds, the names in a column.
func describe(w io.Writer, ds []conformance.Described) {
	width := 0
	for _, d := range ds {
		width = max(width, len(d.Name))
	}
	for _, d := range ds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, d.Name, d.Line)
	}
}

// countTimes says n as a count of occurrences.
func countTimes(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
