package doccite_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/doccite"
)

// TestRecognise pins the rule that decides which code spans of a page name
// a repository path or a Go name, and which are something else.
func TestRecognise(t *testing.T) {
	top := map[string]bool{"internal": true, "sdk": true, "docs": true, "cmd": true}
	const module = "bothy.example.com/bothy"
	tests := []struct {
		span string
		want []string // kind:text, kinds p (path), q (qualified), m (member)
	}{
		// repository paths
		{"internal/adapter", []string{"p:internal/adapter"}},
		{"internal/runs/", []string{"p:internal/runs"}},
		{"./cmd/bothy", []string{"p:cmd/bothy"}},
		{"internal/platform/...", []string{"p:internal/platform"}},
		{"internal/runs/wire_*_test.go", []string{"p:internal/runs/wire_*_test.go"}},
		{"bothy.example.com/bothy/sdk", []string{"p:sdk"}},
		{"bothy.example.com/bothy", nil},
		{"deploy/kubernetes", nil},           // not a top-level folder of this tree
		{"cd sdk/typescript && npm ci", nil}, // a command line
		{"/api/v1/runs", nil},                // a route
		{"POST /graphql", nil},
		{"bothy agent run --once", nil}, // a command
		// Go names qualified by their package
		{"adapter.Render", []string{"q:adapter.Render"}},
		{"agent.Task.FileText", []string{"q:agent.Task.FileText"}},
		{"runs.(*Service).end", []string{"q:runs.Service.end"}},
		{"runs.Service.Context.More", []string{"q:runs.Service.Context"}},
		{"*agent.Error", []string{"q:agent.Error"}},
		{"adapter.Render(ctx, adapter.NewBoundary())", []string{"q:adapter.Render", "q:adapter.NewBoundary"}},
		{"agent.ToolsAllowed(Task.InPlay())", []string{"q:agent.ToolsAllowed", "m:Task.InPlay"}},
		{"prompt.System", []string{"q:prompt.System"}}, // a variable is no package: write Prompt.System
		// Go names by their type
		{"OpenAIConfig.Tools", []string{"m:OpenAIConfig.Tools"}},
		{"DB.InTx(ctx, func(ctx) error)", []string{"m:DB.InTx"}},
		// not Go names
		{"files.max_bytes", nil},    // a configuration key
		{"agent.invocation", nil},   // an event type
		{"Message.provenance", nil}, // a GraphQL field
		{"RunState.COMPLETED", nil}, // an enum value
		{"README.md", nil},
		{"errors.Is", nil}, // the standard library
		{"BOTHY_MODEL_API_KEY", nil},
		{"http://127.0.0.1:8080/api/v1", nil},
		{"registry.example.com/bothy:VERSION", nil},
		{`problem.Internal("runs.end", err)`, []string{"q:problem.Internal"}},
		{"bothy_agent.Config.from_env()", nil}, // Python
		{"org.opencontainers.image.*", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, r := range doccite.Recognise(tt.span, top, module) {
			got = append(got, fmt.Sprintf("%c:%s", "?pqm"[r.Kind], strings.Join(r.Parts, ".")))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Recognise(%q) = %q, want %q", tt.span, got, tt.want)
		}
	}
}

// TestCheckFindsStaleNames proves the check of names on a small repository
// of its own: a made-up package, name, member or path in a code span of
// a README.md (at the root or below it) or a page under docs/ is reported,
// a real one and the other kinds of span are not, a page below the root
// names paths relative to its own folder too, and docs/DECISIONS.md is
// history and exempt, as are READMEs under node_modules and testdata.
func TestCheckFindsStaleNames(t *testing.T) {
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/tree\n\ngo 1.26\n")
	write(t, root, "internal/good/good.go", `// Package good is real.
package good

// Config configures.
type Config struct {
	Inner
	Tools []string
}

// Inner is embedded.
type Inner struct{ Live bool }

// Render renders.
func Render() {}

// Answer answers.
func (c *Config) Answer() {}

func (c Config) end() {}
`)
	write(t, root, "internal/good/good_test.go", "package good\n\n// Helper exists only in a test.\nfunc Helper() {}\n")
	write(t, root, "README.md", "Real: `good.Render()`, `good.Config.Tools`, `good.(*Config).Answer`, `good.Config.end`,\n"+
		"`good.Config.Live`, `Config.Answer`, `internal/good`, `internal/good/good.go`, `example.com/tree/internal/good`,\n"+
		"`files.max_bytes`, `Message.provenance`, `/api/v1/runs`, `bothy agent run`, `errors.Is`.\n"+
		"Made up: `adapter.Render(ctx, adapter.NewBoundary())`, `good.Missing`, `good.Render.X`, `good.Config.Gone`,\n"+
		"`OpenAIConfig.Tools`, `Config.Gone`, `internal/adapter`, `internal/*.rs`, `good.Helper`.\n"+
		"```sh\ngo test ./internal/gone/ # a command in a block: no citation\n```\n")
	write(t, root, "docs/page.md", "`internal/good/nowhere.go` and `docs/gone.md`\n") // the second once, as a citation
	write(t, root, "docs/DECISIONS.md", "- history: `adapter.Render`\n")
	write(t, root, "sdk/README.md", "checked too: `adapter.Render`\n")
	write(t, root, "node_modules/pkg/README.md", "not checked: `adapter.Render`, `internal/gone`\n")
	write(t, root, "internal/good/testdata/README.md", "not checked: `adapter.Render`, `internal/gone`\n")
	// A page below the root names paths relative to its folder as well.
	write(t, root, "deploy/kube/base/app.yaml", "kind: Deployment\n")
	write(t, root, "deploy/kube/README.md", "Real: `base/app.yaml`, `base/`, `./base/*.yaml`, `../kube/base`, `deploy/kube/base`, `internal/good`.\n"+
		"Made up: `base/gone.yaml`, `./base/*.json`, `../gone.txt`, `../../../outside`, `deploy/kube/gone`.\n"+
		"Not paths: `tools/list`, `app.kubernetes.io/name`.\n")

	got := problems(t, root)
	want := []string{
		"README.md:4 adapter.Render: no Go package named adapter in the repository",
		"README.md:4 adapter.NewBoundary: no Go package named adapter in the repository",
		"README.md:4 good.Missing: package good declares no Missing",
		"README.md:4 good.Render.X: good.Render is not a type",
		"README.md:4 good.Config.Gone: good.Config has no field or method Gone",
		"README.md:5 OpenAIConfig.Tools: no Go type named OpenAIConfig in the repository",
		"README.md:5 Config.Gone: no type Config in the repository has a field or method Gone",
		"README.md:5 internal/adapter: no such file or folder in the repository",
		"README.md:5 internal/*.rs: no file of the repository matches",
		"README.md:5 good.Helper: package good declares no Helper",
		"docs/page.md:1 internal/good/nowhere.go: no such file or folder in the repository",
		"docs/page.md:1 docs/gone.md: no such file in the repository",
		"sdk/README.md:1 adapter.Render: no Go package named adapter in the repository",
		"deploy/kube/README.md:2 base/gone.yaml: no such file or folder in the repository",
		"deploy/kube/README.md:2 ./base/*.json: no file of the repository matches",
		"deploy/kube/README.md:2 ../gone.txt: no such file or folder in the repository",
		"deploy/kube/README.md:2 ../../../outside: a path outside the repository",
		"deploy/kube/README.md:2 deploy/kube/gone: no such file or folder in the repository",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckFindsStaleLayout proves the check of a marked layout block: a
// named path the tree lacks is reported, and so is a folder the layout
// leaves out at the top or beside folders it lists.
func TestCheckFindsStaleLayout(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"cmd/tool", "internal/alpha", "internal/beta", "internal/beta/sub", "internal/platform/db", "sdk/agent", "docs"} {
		write(t, root, d+"/x.txt", "x\n")
	}
	write(t, root, "README.md", "Layout:\n\n<!-- layout: checked -->\n```\n"+
		"cmd/tool      the binary\n"+
		"internal/     modules:\n"+
		"  # a group\n"+
		"  alpha         the first\n"+
		"  gone          a module that moved\n"+
		"  platform/...  db, and a long description that\n"+
		"                continues on a second line\n"+
		"docs/         pages\n"+
		"```\n\n```\nnot/a/layout  unchecked\n```\n")
	got := problems(t, root)
	want := []string{
		"README.md:3 internal/beta: a folder of the repository the layout does not name",
		"README.md:3 sdk: a folder of the repository the layout does not name",
		"README.md:9 internal/gone: the layout names a path the repository does not have",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// write makes the file rel under root with text.
func write(t *testing.T, root, rel, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(root, filepath.Dir(rel)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, rel), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// problems runs the check on root and returns its problems as
// "file:line cite: why", sorted.
func problems(t *testing.T, root string) []string {
	t.Helper()
	ps, err := doccite.Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s:%d %s: %s", p.File, p.Line, p.Cite, p.Why))
	}
	slices.Sort(got)
	return got
}
