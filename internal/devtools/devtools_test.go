// Package devtools_test holds the rule of the folder: internal/devtools is
// the build and test tooling, and the product never depends on it.
package devtools_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProductDoesNotImportDevtools: no package outside internal/devtools
// imports one inside it (test files aside), so the binary and the SDK
// never carry a test harness, a linter or a test cluster.
func TestProductDoesNotImportDevtools(t *testing.T) {
	t.Parallel()
	const devtools = "bothy.example.com/bothy/internal/devtools"
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...", "./sdk/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	packages := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		packages++
		if fields[0] == devtools || strings.HasPrefix(fields[0], devtools+"/") {
			continue
		}
		for _, imp := range fields[1:] {
			if imp == devtools || strings.HasPrefix(imp, devtools+"/") {
				t.Errorf("%s imports %s: the product must not depend on the build and test tooling", fields[0], imp)
			}
		}
	}
	if packages < 50 {
		t.Fatalf("go list named %d packages; the check read too few to mean anything", packages)
	}
}

// maxServerTests bounds the top-level tests of internal/server: the
// package is the HTTP stack, and the tests of a module's rules belong to
// that module (through moduletest), not to the server (issue 48). A new
// flow over the wire joins the top-level test of its area as a subtest.
const maxServerTests = 80

// TestServerTestsStayFew: internal/server declares fewer than
// maxServerTests top-level tests.
func TestServerTestsStayFew(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../server/*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files of internal/server (%v)", err)
	}
	var tests []string
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestMain" {
				tests = append(tests, fn.Name.Name)
			}
		}
	}
	if len(tests) >= maxServerTests {
		t.Errorf("internal/server declares %d top-level tests, want fewer than %d: make the new one a subtest of its area's test, or test the rule in its module", len(tests), maxServerTests)
	}
	if len(tests) < 20 {
		t.Fatalf("found %d tests in internal/server; the check read too little to mean anything", len(tests))
	}
}
