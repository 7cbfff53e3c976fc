// Command testrun runs the tests of Go packages as `go test -json -count=1`
// does, but links each package's test binary into a folder that outlives the
// run, so that the next run links only the binaries whose code changed.
//
// `go test` links every test binary again at every run, even when nothing
// changed: for this repository's 69 test packages that was 120 s of CPU, a
// fifth of a warm `make test` on two cores. `go test -c -o DIR/` keeps a
// binary whose build ID is still current, so a warm run links nothing.
//
// Usage (the Makefile's test target, through gotestsum --raw-command):
//
//	go run ./internal/devtools/testrun [-dir bin/testbins] [-p 4] [-parallel 8] [-timeout 20m] PACKAGES...
//
// It writes the events of `go test -json` on standard output: the build's
// events, then each package's events (packages run -p at a time, in the
// order the command line names them: an explicit path before a pattern
// that also matches it). Every test runs (no result cache). It exits 1 when
// a build or a test failed, 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line of one run.
type options struct {
	dir      string        // where the test binaries live between runs
	procs    int           // packages at once
	parallel int           // -test.parallel of each binary
	timeout  time.Duration // -test.timeout of each binary
	patterns []string      // the packages, as go list takes them
	workDir  string        // where the go commands run ("" is the current directory)
	env      []string      // added to the environment of the go commands
	stderr   io.Writer     // what the go commands say besides events
}

// run parses args and runs the tests, writing events to stdout and its own
// complaints to stderr; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{stderr: stderr}
	fs.StringVar(&o.dir, "dir", "bin/testbins", "the folder that keeps the test binaries between runs")
	fs.IntVar(&o.procs, "p", 4, "how many packages run at once")
	fs.IntVar(&o.parallel, "parallel", 8, "how many tests of one package run at once")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "the time limit of each package's tests")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.patterns = fs.Args()
	if len(o.patterns) == 0 || o.procs < 1 || o.parallel < 1 || o.timeout <= 0 {
		fs.Usage()
		return 2
	}
	ok, err := runAll(ctx, o, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "testrun:", err)
		return 1
	}
	if !ok {
		return 1
	}
	return 0
}

// runAll lists, builds and runs the packages; it reports whether every
// build and every test passed.
func runAll(ctx context.Context, o options, stdout io.Writer) (bool, error) {
	pkgs, err := listPackages(ctx, o)
	if err != nil {
		return false, err
	}
	out := &eventWriter{w: stdout}
	built, err := buildAll(ctx, o, pkgs, out)
	if err != nil {
		return false, err
	}
	return runPackages(ctx, o, pkgs, built, out)
}
