// Package devtools_test holds the rule of the folder: internal/devtools is
// the build and test tooling, and the product never depends on it.
package devtools_test

import (
	"os/exec"
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
