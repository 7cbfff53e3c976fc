package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// stressRun is one `go test -run PATTERN PACKAGES...` line of the
// Makefile's stress target.
var stressRun = regexp.MustCompile(`-run '([^']+)'((?: \./[^ \n]+)+)`)

// testFunc finds the top-level tests of a Go test file.
var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)

// TestStressPatternsNameTests keeps `make stress` from rotting silently: a
// renamed or deleted test would leave a name of its -run patterns that
// matches nothing, and `go test -run` says nothing about a pattern that
// runs no test. Every alternative of every pattern must name at least one
// top-level test of the packages the line names.
func TestStressPatternsNameTests(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(mk), "\n") {
		if name, value, ok := strings.Cut(line, "="); ok && strings.HasPrefix(name, "STRESS_") {
			vars[strings.TrimSpace(name)] = strings.ReplaceAll(strings.TrimSpace(value), "$$", "$")
		}
	}
	recipe := string(mk[strings.Index(string(mk), "\nstress:"):])
	recipe = recipe[:strings.Index(recipe, "\n\n")]
	lines := stressRun.FindAllStringSubmatch(recipe, -1)
	if len(lines) < 4 {
		t.Fatalf("found %d -run lines in the stress target; the parser no longer reads the Makefile", len(lines))
	}
	for _, l := range lines {
		pattern := strings.ReplaceAll(l[1], "$$", "$")
		if v := strings.TrimSuffix(strings.TrimPrefix(pattern, "$("), ")"); v != pattern {
			pattern = vars[v]
		}
		tests := testsIn(t, root, strings.Fields(l[2]))
		for _, alt := range alternatives(pattern) {
			re, err := regexp.Compile("^" + alt + "$")
			if err != nil {
				t.Fatalf("%s: %v", alt, err)
			}
			found := false
			for _, name := range tests {
				found = found || re.MatchString(name)
			}
			if !found {
				t.Errorf("make stress names %q, which matches no test of %s", alt, l[2])
			}
		}
	}
}

// alternatives splits ^(A|B|C)$ (or ^A$) into A, B and C.
func alternatives(pattern string) []string {
	p := strings.TrimSuffix(strings.TrimPrefix(pattern, "^"), "$")
	p = strings.TrimSuffix(strings.TrimPrefix(p, "("), ")")
	return strings.Split(p, "|")
}

// testsIn lists the top-level tests of the packages pkgs (./dir paths).
func testsIn(t *testing.T, root string, pkgs []string) []string {
	t.Helper()
	var out []string
	for _, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(root, p, "*_test.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("make stress names %s, which has no test files", p)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range testFunc.FindAllStringSubmatch(string(src), -1) {
				out = append(out, m[1])
			}
		}
	}
	return out
}
