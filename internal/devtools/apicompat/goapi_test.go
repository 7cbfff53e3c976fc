package apicompat_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apicompat"
)

// checkGo type-checks one package of Go source (standard library imports
// only) as import path bothy.example.com/bothy/sdk/agent.
func checkGo(t *testing.T, src string) apicompat.GoAPI {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "agent.go", "package agent\n"+src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("bothy.example.com/bothy/sdk/agent", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return apicompat.GoAPI{pkg.Path(): pkg}
}

// TestGoBreaks: what breaks a program written against the old API is a
// break named by package and identifier; additions are not breaks.
func TestGoBreaks(t *testing.T) {
	t.Parallel()
	const base = `
type Config struct { Server string; Model string }
type Adapter struct{}
func (a *Adapter) Run() error { return nil }
func New(c Config) *Adapter { return nil }
var ErrRunClaimed = error(nil)
`
	for _, c := range []struct {
		name, cur string
		want      []string // subjects
	}{
		{"unchanged", base, nil},
		{"additions", base + "func Extra() {}\nconst Version = 1\n", nil},
		{"function removed", strings.Replace(base, "func New(c Config) *Adapter { return nil }", "", 1), []string{"agent.New"}},
		{"field removed", strings.Replace(base, "; Model string", "", 1), []string{"agent.Config.Model"}},
		{"method changed", strings.Replace(base, "Run() error", "Run(n int) error", 1), []string{"agent.Adapter.Run"}},
		{"variable removed", strings.Replace(base, "var ErrRunClaimed = error(nil)", "", 1), []string{"agent.ErrRunClaimed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, b := range apicompat.GoBreaks(checkGo(t, base), checkGo(t, c.cur)) {
				if b.Face != "Go" {
					t.Errorf("face %q", b.Face)
				}
				got = append(got, b.Subject)
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("breaks %v, want %v", got, c.want)
			}
		})
	}
	gone := apicompat.GoBreaks(checkGo(t, base), apicompat.GoAPI{})
	if len(gone) != 1 || gone[0].Subject != "bothy.example.com/bothy/sdk/agent" || gone[0].Detail != "package removed" {
		t.Errorf("a removed package: %v", gone)
	}
}

// TestGoSnapshotRoundTrip: a snapshot written and read back compares
// equal to its source, and still shows a removed exported name as a break
// that only a CHANGELOG entry with a migration note lets through.
func TestGoSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := checkGo(t, "func New() {}\nfunc Keep() {}\n")
	if err := old.Write(dir); err != nil {
		t.Fatal(err)
	}
	snap, err := apicompat.ReadGoAPI(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b := apicompat.GoBreaks(snap, old); len(b) != 0 {
		t.Fatalf("a snapshot differs from its source: %v", b)
	}
	breaks := apicompat.GoBreaks(snap, checkGo(t, "func Keep() {}\n"))
	if len(breaks) != 1 || breaks[0].Subject != "agent.New" {
		t.Fatalf("breaks %v, want agent.New removed", breaks)
	}
	for _, c := range []struct {
		changelog string
		unlisted  int
	}{
		{"## Unreleased\n\n- Nothing of note.\n\n## 1.0.0\n", 1},
		{"## Unreleased\n\n- `agent.New` is gone.\n\n## 1.0.0\n", 1},
		{"## Unreleased\n\n- `agent.New` is gone. Migration: call `agent.Run`.\n\n## 1.0.0\n", 0},
	} {
		log, err := apicompat.ParseChangelog(c.changelog)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(log.Unlisted(breaks)); got != c.unlisted {
			t.Errorf("%q: %d unlisted, want %d", c.changelog, got, c.unlisted)
		}
	}
	if _, err := apicompat.ReadGoAPI(t.TempDir()); err == nil {
		t.Error("an empty folder read as a snapshot")
	}
}

// TestGoSDKAPICompatible is the Go SDK's API gate: the exported API of
// the SDK module's library packages may change only compatibly from the
// snapshot in sdk/api (make sdk-api-snapshot, retaken at every release),
// unless the next version's CHANGELOG.md section names the identifier in
// backticks with a migration note.
func TestGoSDKAPICompatible(t *testing.T) {
	t.Parallel()
	snap, err := apicompat.ReadGoAPI(filepath.Join(root, "sdk/api"))
	if err != nil {
		t.Fatal(err)
	}
	cur, err := apicompat.LoadGoAPI(filepath.Join(root, "sdk"), "./...")
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := apicompat.ParseChangelog(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range log.Unlisted(apicompat.GoBreaks(snap, cur)) {
		t.Errorf("incompatible change to the Go SDK not listed in CHANGELOG.md under the next version (name `%s` and give a \"Migration:\" note): %s", b.Subject, b.Detail)
	}
}
