package modules_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// modulePath is the main module's path; the SDK's module lies below it, in
// the folder of the same name, so an import path maps to a folder either way.
const modulePath = "bothy.example.com/bothy"

// exampleWorld is the example world's builder: `bothy dev`, `bothy seed`
// and the test harnesses add it to an assembled server; the product's
// wiring and server never link it.
const exampleWorld = "internal/world"

// TestWiringLeavesOutTheExampleWorld fails when the wiring or the server
// imports the example world, directly or through any package of the
// repository: what `bothy serve` assembles (server.New, modules.New) cannot
// reach the example data; only the commands and harnesses that build it do.
func TestWiringLeavesOutTheExampleWorld(t *testing.T) {
	root := moduletest.RepoRoot(t)
	for _, from := range []string{"internal/modules", "internal/server"} {
		if chain := importChain(t, root, from, exampleWorld); chain != nil {
			t.Errorf("%s imports %s: %s", from, exampleWorld, strings.Join(chain, " -> "))
		}
	}
}

// TestImportChainDetects keeps the check honest: the command, which holds
// `bothy dev`, does reach the example world, and through a chain of real
// imports.
func TestImportChainDetects(t *testing.T) {
	root := moduletest.RepoRoot(t)
	chain := importChain(t, root, "cmd/bothy", exampleWorld)
	if len(chain) < 2 || chain[0] != "cmd/bothy" || chain[len(chain)-1] != exampleWorld {
		t.Fatalf("importChain(cmd/bothy, %s) = %v, want a chain from the command to the world", exampleWorld, chain)
	}
	if chain := importChain(t, root, "internal/trust", exampleWorld); chain != nil {
		t.Errorf("importChain(internal/trust, %s) = %v, want none: the trust levels are a leaf", exampleWorld, chain)
	}
}

// importChain returns a shortest chain of non-test imports from the package
// in folder from to the package in folder to (folders relative to root), or
// nil when there is none. It reads only the import clauses of the files the
// default build context selects (go/build, no go command), which keeps it
// well under a second; packages outside the repository cannot import the
// repository's, so the walk stays inside it.
func importChain(t *testing.T, root, from, to string) []string {
	t.Helper()
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		dir := queue[0]
		queue = queue[1:]
		if dir == to {
			var chain []string
			for d := dir; d != ""; d = parent[d] {
				chain = append(chain, d)
			}
			slices.Reverse(chain)
			return chain
		}
		pkg, err := build.ImportDir(filepath.Join(root, filepath.FromSlash(dir)), build.ImportComment)
		if err != nil {
			t.Fatalf("read the imports of %s: %v", dir, err)
		}
		for _, imp := range pkg.Imports {
			rel, ok := strings.CutPrefix(imp, modulePath+"/")
			if _, seen := parent[rel]; !ok || seen {
				continue
			}
			parent[rel] = dir
			queue = append(queue, rel)
		}
	}
	return nil
}
