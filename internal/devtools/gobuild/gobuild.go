// Package gobuild builds the Go programs that tests run (bothy, the SDK's
// examples, the conformance kit's adapters) into a folder that outlives the
// test run, bin/testbins/built under the repository root.
//
// go build -o FILE leaves FILE alone when its build ID is current, so a test
// run links only the programs whose code changed: linking bothy costs 6 s of
// CPU, and five test packages link it. Each test package builds into a
// folder of its own, so that packages running side by side never write the
// same file.
package gobuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// builds holds one build per target path, so that the tests of one
// package that ask for the same program build it once.
var builds sync.Map // target path -> *build

// build is one go build of a program, done once.
type build struct {
	once sync.Once
	out  []byte
	err  error
}

// EnvBothy names a bothy binary built from this tree for every test
// package: make test builds cmd/bothy once before the tests and sets it,
// so that five test packages do not each build (and, in a fresh clone,
// link) the same program.
const EnvBothy = "BOTHY_TEST_BOTHY"

// Bothy is the import path of the server's command.
const Bothy = "bothy.example.com/bothy/cmd/bothy"

// Binary builds the package pkg (an import path, or a path starting with ./
// relative to the test's folder) and returns the path of its binary, named
// after pkg's last element. The test fails when the build fails. For
// cmd/bothy it returns the binary EnvBothy names, when set.
func Binary(t testing.TB, pkg string) string {
	t.Helper()
	if bin := os.Getenv(EnvBothy); bin != "" && pkg == Bothy {
		return bin
	}
	bin, err := Target(pkg)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := builds.LoadOrStore(bin, &build{})
	b := v.(*build)
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := Command(ctx, bin, pkg)
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, b.err, b.out)
	}
	return bin
}

// Command is the go build of pkg into bin, for a test that starts the
// build itself and does other work while it links. It stamps no version
// control information (-buildvcs=false): a commit would change every
// binary's stamp and so link each again although no code changed; the
// tests' binaries report revision "unknown" (internal/platform/version).
func Command(ctx context.Context, bin, pkg string) *exec.Cmd {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	return exec.CommandContext(ctx, goTool, "build", "-buildvcs=false", "-o", bin, pkg)
}

// Target returns where pkg's binary is kept for the test package that runs
// in the current folder: bin/testbins/built/FOLDER/PKG/NAME under the
// repository root, FOLDER the test's folder relative to the root and PKG
// the package path with underscores, NAME the package's last element. It
// makes the folder.
func Target(pkg string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("gobuild: %w", err)
	}
	root, err := repoRoot(wd)
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(root, wd)
	if err != nil {
		return "", fmt.Errorf("gobuild: %w", err)
	}
	name := path.Base(filepath.ToSlash(pkg))
	key := strings.NewReplacer("/", "_", ".", "_").Replace(strings.TrimPrefix(pkg, "./"))
	dir := filepath.Join(root, "bin", "testbins", "built", rel, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("gobuild: %w", err)
	}
	return filepath.Join(dir, name), nil
}

// repoRoot is the nearest folder at or above dir that holds go.work.
func repoRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.work")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("gobuild: no go.work at or above %s", dir)
		}
		d = up
	}
}
