package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// pkg is one package of the run, as go list describes it.
type pkg struct {
	ImportPath   string
	Dir          string
	Match        []string // the command-line patterns that name it
	TestGoFiles  []string
	XTestGoFiles []string
	binary       string // the test binary's file name in options.dir ("" without tests)
}

// hasTests reports whether the package has test files of its own.
func (p pkg) hasTests() bool { return len(p.TestGoFiles)+len(p.XTestGoFiles) > 0 }

// goCommand is a go command run in the run's working directory with its
// environment.
func goCommand(ctx context.Context, o options, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.workDir
	cmd.Env = append(os.Environ(), o.env...)
	return cmd
}

// listPackages lists the packages the patterns name, in the order they run,
// each with its binary's name.
func listPackages(ctx context.Context, o options) ([]pkg, error) {
	cmd := goCommand(ctx, o, append([]string{"list", "-json=ImportPath,Dir,Match,TestGoFiles,XTestGoFiles"}, o.patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		pkgs = append(pkgs, p)
	}
	order(pkgs, o.patterns)
	nameBinaries(pkgs)
	return pkgs, nil
}

// order sorts the packages by the first command-line pattern that names
// them, keeping go list's order among those of one pattern: the slowest
// packages, named first, start first.
func order(pkgs []pkg, patterns []string) {
	rank := func(p pkg) int {
		best := len(patterns)
		for _, m := range p.Match {
			if i := slices.Index(patterns, m); i >= 0 && i < best {
				best = i
			}
		}
		return best
	}
	slices.SortStableFunc(pkgs, func(a, b pkg) int { return rank(a) - rank(b) })
}

// nameBinaries gives each package with tests the file name of its binary:
// its last path element, as go test -c names it, or, when another package
// of the run has the same last element, its whole import path with
// underscores, so that no two binaries share a file.
func nameBinaries(pkgs []pkg) {
	count := map[string]int{}
	for _, p := range pkgs {
		if p.hasTests() {
			count[path.Base(p.ImportPath)]++
		}
	}
	for i, p := range pkgs {
		if !p.hasTests() {
			continue
		}
		name := path.Base(p.ImportPath)
		if count[name] > 1 {
			name = strings.NewReplacer("/", "_", ".", "_").Replace(p.ImportPath)
		}
		pkgs[i].binary = name + ".test"
	}
}

// buildAll links the test binaries into o.dir, passing the build's events
// on; it returns the packages whose binary is current. One go test -c
// builds every package whose binary has its default name (go test links
// them side by side and skips those whose build ID is current); each
// package of a shared name is built on its own.
func buildAll(ctx context.Context, o options, pkgs []pkg, out *eventWriter) (map[string]bool, error) {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return nil, fmt.Errorf("test binaries: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("test binaries: %w", err)
	}
	var batch []string
	var alone []pkg
	for _, p := range pkgs {
		switch {
		case !p.hasTests():
		case p.binary == path.Base(p.ImportPath)+".test":
			batch = append(batch, p.ImportPath)
		default:
			alone = append(alone, p)
		}
	}
	built := map[string]bool{}
	if len(batch) > 0 && build(ctx, o, out, dir+string(filepath.Separator), batch...) {
		for _, ip := range batch {
			built[ip] = true
		}
	} else {
		// The batch failed: a package whose build failed keeps the binary
		// of an earlier run, so each is built again on its own to know
		// which binaries are current (the build's errors are already out).
		for _, ip := range batch {
			built[ip] = build(ctx, o, nil, filepath.Join(dir, path.Base(ip)+".test"), ip)
		}
	}
	for _, p := range alone {
		built[p.ImportPath] = build(ctx, o, out, filepath.Join(dir, p.binary), p.ImportPath)
	}
	return built, nil
}

// build runs go test -c -json -o target for the packages, writing the
// build's events to out (nil: dropped); it reports whether it succeeded.
// It skips go test's vet step: make test runs go vet with every analyzer
// beside the tests.
func build(ctx context.Context, o options, out *eventWriter, target string, importPaths ...string) bool {
	cmd := goCommand(ctx, o, append([]string{"test", "-c", "-json", "-vet=off", "-o", target}, importPaths...)...)
	if out == nil {
		return cmd.Run() == nil
	}
	// The build's errors are events on standard output; what the go
	// command says on its own (a pattern that names nothing) goes to
	// standard error, as go test writes it.
	lines := out.lines()
	cmd.Stdout, cmd.Stderr = lines, o.stderr
	err := cmd.Run()
	lines.flush()
	return err == nil
}
