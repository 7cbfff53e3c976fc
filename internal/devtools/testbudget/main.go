// Command testbudget prints the time budget of a `go test -json` run: the
// wall time of the whole `make test` and the slowest packages and top-level
// tests, so that a change that slows the suite down shows it in its own run.
//
// Usage (the Makefile's test target):
//
//	go run ./internal/devtools/testbudget -json FILE -since UNIX_SECONDS [-top N] [-budget SECONDS]
//
// FILE holds the events of `go test -json` (gotestsum's --jsonfile);
// UNIX_SECONDS is when the run began. A wall time over the budget (0: none)
// is said in a last line, not failed: timings on shared machines are noisy,
// and a test run must not fail for the machine's load. It exits 1 when FILE
// cannot be read, 2 on bad flags.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

func main() {
	jsonFile := flag.String("json", "", "the events of go test -json")
	since := flag.Int64("since", 0, "when the run began, in Unix seconds")
	top := flag.Int("top", 5, "how many packages and tests to list")
	budget := flag.Int("budget", 0, "the wall-time budget in seconds (0: none)")
	flag.Parse()
	if *jsonFile == "" || *since == 0 || *top < 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(*jsonFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbudget:", err)
		os.Exit(1)
	}
	defer f.Close()
	r, err := Read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbudget:", err)
		os.Exit(1)
	}
	wall := time.Since(time.Unix(*since, 0)).Round(time.Second)
	Print(os.Stdout, r, wall, *top)
	if *budget > 0 && wall > time.Duration(*budget)*time.Second {
		fmt.Printf("OVER BUDGET: make test took %s, its budget is %ds; find what slowed it in the lists above\n", wall, *budget)
	}
}

// Timing is how long one package or one top-level test ran.
type Timing struct {
	Name    string
	Seconds float64
}

// Run is what a go test -json stream says about time: every package and
// every top-level test that ended (passed, failed or skipped), slowest
// first.
type Run struct {
	Packages []Timing
	Tests    []Timing
}

// event is the part of a test2json event this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
}

// Read parses a go test -json stream. Lines that are not JSON objects (a
// build error printed beside the events) are passed over; an error reading
// r is returned.
func Read(r io.Reader) (Run, error) {
	var run Run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if json.Unmarshal(line, &e) != nil {
			continue
		}
		if e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
			continue
		}
		switch {
		case e.Test == "":
			run.Packages = append(run.Packages, Timing{Name: e.Package, Seconds: e.Elapsed})
		case !strings.Contains(e.Test, "/"):
			run.Tests = append(run.Tests, Timing{Name: e.Package + " " + e.Test, Seconds: e.Elapsed})
		}
	}
	if err := sc.Err(); err != nil {
		return Run{}, errors.Join(errors.New("read the events"), err)
	}
	slowestFirst(run.Packages)
	slowestFirst(run.Tests)
	return run, nil
}

// slowestFirst sorts ts by time, slowest first, names breaking ties.
func slowestFirst(ts []Timing) {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Seconds != ts[j].Seconds {
			return ts[i].Seconds > ts[j].Seconds
		}
		return ts[i].Name < ts[j].Name
	})
}

// Print writes the budget report: the wall time, then the top slowest
// packages and tests.
func Print(w io.Writer, r Run, wall time.Duration, top int) {
	fmt.Fprintf(w, "make test: %s wall time, %d packages, %d top-level tests\n", wall, len(r.Packages), len(r.Tests))
	list := func(title string, ts []Timing) {
		fmt.Fprintf(w, "%s:\n", title)
		for _, t := range ts[:min(top, len(ts))] {
			fmt.Fprintf(w, "  %7.1fs  %s\n", t.Seconds, t.Name)
		}
	}
	list("slowest packages", r.Packages)
	list("slowest tests", r.Tests)
}
