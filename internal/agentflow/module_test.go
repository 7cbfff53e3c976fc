package agentflow_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSDKIsAModuleOfItsOwn: a program that imports only sdk/agent, in a
// module of its own (the SDK found through a replace, as a user's module
// finds a released one), sees the SDK as a module apart from the server's,
// pulls at most 30 go.sum lines, and no OpenTelemetry: the SDK costs its
// users no more than the agent protocol needs.
func TestSDKIsAModuleOfItsOwn(t *testing.T) {
	t.Parallel()
	sdk, err := filepath.Abs("../../sdk")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/lotse\n\ngo 1.26.0\n\nrequire bothy.example.com/bothy/sdk v0.0.0\n\nreplace bothy.example.com/bothy/sdk => "+sdk+"\n")
	write("main.go", `package main

import (
	"context"
	"log"
	"os"

	"bothy.example.com/bothy/sdk/agent"
)

func main() {
	cfg := agent.Config{Server: os.Getenv("BOTHY_SERVER"), Token: os.Getenv("BOTHY_AGENT_TOKEN")}
	log.Fatal(agent.Run(context.Background(), cfg, func(ctx context.Context, t *agent.Task) error {
		return t.Answer(ctx, "Noted.")
	}))
}
`)
	// The module cache holds everything the server's module needs, the
	// SDK's dependencies among them; the proxy is off so that the test
	// never reaches the network and fails if the SDK needs more. The
	// checksum database is off too: the cache's modules were verified
	// against the server's go.sum when they were downloaded, and a lookup
	// of the new module's sums would need sum.golang.org, which a machine
	// with only the module proxy cannot reach.
	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	gocmd("mod", "tidy")
	if mod := gocmd("list", "-m", "bothy.example.com/bothy/sdk"); strings.TrimSpace(mod) != "bothy.example.com/bothy/sdk v0.0.0 => "+sdk {
		t.Errorf("go list -m bothy.example.com/bothy/sdk: %q, want the SDK as a module of its own, replaced", mod)
	}
	// The modules that provide the program's packages: its own, the SDK's
	// and the WebSocket library's, never the server's.
	mods := map[string]bool{}
	for _, m := range strings.Fields(gocmd("list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")) {
		mods[m] = true
	}
	if len(mods) != 3 || !mods["example.com/lotse"] || !mods["bothy.example.com/bothy/sdk"] || !mods["github.com/coder/websocket"] {
		t.Errorf("the program's packages come from modules %v, want example.com/lotse, the SDK and github.com/coder/websocket", mods)
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(sum), "\n"); n > 30 {
		t.Errorf("go.sum has %d lines, want at most 30:\n%s", n, sum)
	}
	if deps := gocmd("list", "-deps", "."); strings.Contains(deps, "go.opentelemetry.io") || strings.Contains(deps, "bothy.example.com/bothy/internal") {
		t.Errorf("a program of sdk/agent builds with OpenTelemetry or the server:\n%s", deps)
	}
	gocmd("build", "-o", filepath.Join(dir, "lotse"), ".")
}
