package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// runner runs the packages' binaries, o.procs at a time.
type runner struct {
	o       options
	dir     string // the absolute o.dir
	convert string // the test2json binary
	path    string // PATH of the binaries: GOROOT/bin first, as go test sets it
	out     *eventWriter
	failed  atomic.Bool
}

// runPackages runs every package in order, o.procs at a time, and reports
// whether all passed; a package whose build failed fails without running.
func runPackages(ctx context.Context, o options, pkgs []pkg, built map[string]bool, out *eventWriter) (bool, error) {
	r, err := newRunner(ctx, o, out)
	if err != nil {
		return false, err
	}
	queue := make(chan pkg)
	var wg sync.WaitGroup
	for range o.procs {
		wg.Go(func() {
			for p := range queue {
				r.one(ctx, p, built[p.ImportPath])
			}
		})
	}
	for _, p := range pkgs {
		queue <- p
	}
	close(queue)
	wg.Wait()
	return !r.failed.Load(), nil
}

// newRunner builds test2json beside the test binaries (go build keeps it
// when current) and finds GOROOT.
func newRunner(ctx context.Context, o options, out *eventWriter) (*runner, error) {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return nil, fmt.Errorf("test binaries: %w", err)
	}
	r := &runner{o: o, dir: dir, convert: filepath.Join(dir, "test2json"), out: out}
	if b, err := goCommand(ctx, o, "build", "-o", r.convert, "cmd/test2json").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build cmd/test2json: %w\n%s", err, b)
	}
	goroot, err := goCommand(ctx, o, "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	r.path = filepath.Join(strings.TrimSpace(string(goroot)), "bin") + string(os.PathListSeparator) + os.Getenv("PATH")
	return r, nil
}

// one runs one package and writes its events.
func (r *runner) one(ctx context.Context, p pkg, built bool) {
	start := func() { r.out.emit(event{Action: "start", Package: p.ImportPath}) }
	switch {
	case !p.hasTests():
		start()
		r.out.emit(event{Action: "output", Package: p.ImportPath, Output: "?   \t" + p.ImportPath + "\t[no test files]\n"})
		zero := 0.0
		r.out.emit(event{Action: "skip", Package: p.ImportPath, Elapsed: &zero})
	case !built:
		r.failed.Store(true)
		start()
		r.out.emit(event{Action: "output", Package: p.ImportPath, Output: "FAIL\t" + p.ImportPath + " [build failed]\n"})
		zero := 0.0
		r.out.emit(event{Action: "fail", Package: p.ImportPath, Elapsed: &zero, FailedBuild: p.ImportPath})
	default:
		for _, ev := range r.test(ctx, p) {
			if ev.Action == "fail" {
				r.failed.Store(true)
			}
			r.out.emit(ev)
		}
	}
}

// test runs p's binary in p's folder through test2json, passing its events
// on as they come except the one that ends the package, which it returns
// with what the binary's exit adds to it (see finalEvents).
func (r *runner) test(ctx context.Context, p pkg) []event {
	// go test's own backstop: a minute past the binary's time limit.
	ctx, cancel := context.WithTimeout(ctx, r.o.timeout+time.Minute)
	defer cancel()
	bin := exec.CommandContext(ctx, filepath.Join(r.dir, p.binary), "-test.v=test2json", "-test.paniconexit0",
		"-test.timeout="+r.o.timeout.String(), "-test.parallel="+strconv.Itoa(r.o.parallel))
	bin.Dir = p.Dir
	bin.Env = append(os.Environ(), "PATH="+r.path)
	var end *event
	lines := &lineWriter{line: func(line []byte) {
		if ev, ok := packageEnd(line); ok {
			end = &ev
			return
		}
		r.out.writeLine(line)
	}}
	convert := exec.CommandContext(ctx, r.convert, "-t", "-p", p.ImportPath)
	convert.Stdout = lines
	began := time.Now()
	err := pipe(bin, convert)
	lines.flush()
	return finalEvents(p.ImportPath, end, err, time.Since(began).Seconds())
}

// pipe runs bin with its standard output and error into convert's input, as
// go test joins them, and returns bin's exit.
func pipe(bin, convert *exec.Cmd) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("pipe: %w", err)
	}
	convert.Stdin = pr
	var stderr bytes.Buffer
	convert.Stderr = &stderr
	if err := convert.Start(); err != nil {
		pr.Close()
		pw.Close()
		return fmt.Errorf("test2json: %w", err)
	}
	pr.Close()
	bin.Stdout, bin.Stderr = pw, pw
	runErr := bin.Run()
	pw.Close()
	if err := convert.Wait(); err != nil && runErr == nil {
		return fmt.Errorf("test2json: %w: %s", err, stderr.Bytes())
	}
	return runErr
}
