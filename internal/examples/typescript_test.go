package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// tsDir is the TypeScript SDK's folder, from this package's.
const tsDir = "../../sdk/typescript"

var (
	tsOnce sync.Once
	tsErr  error
	tsOut  []byte
)

// tsReady installs and builds the TypeScript SDK (sdk/typescript/install.sh,
// which make sdk-typescript runs too: npm ci only when the lock changed,
// the build only when the sources did) once per test process, and returns
// the SDK's absolute folder.
func tsReady(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(tsDir)
	if err != nil {
		t.Fatal(err)
	}
	tsOnce.Do(func() { tsOut, tsErr = exec.Command(filepath.Join(dir, "install.sh")).CombinedOutput() })
	if tsErr != nil {
		t.Fatalf("sdk/typescript/install.sh: %v\n%s", tsErr, tsOut)
	}
	return dir
}

// TestTypeScriptSDKRules runs the TypeScript SDK's own tests (npm test:
// the Node test runner on the pure rules: configuration, holder headers,
// acknowledgement order, answer keys, the tool gate, the HTTP tools file)
// and fails on any failure.
func TestTypeScriptSDKRules(t *testing.T) {
	t.Parallel()
	dir := tsReady(t)
	cmd := exec.CommandContext(t.Context(), "npm", "test")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm test in sdk/typescript: %v\n%s", err, out)
	}
}

// TestTypeScriptExamplesPassTheKit: both TypeScript examples, run with
// node as their users run them, pass every scenario of the conformance kit
// that applies to the capabilities they declare (the model example model,
// live, tools, files and attach; the echo example none).
func TestTypeScriptExamplesPassTheKit(t *testing.T) {
	t.Parallel()
	dir := tsReady(t)
	for _, c := range []struct {
		file, capabilities string
	}{
		{"model.mjs", "model,live,tools,files,attach"},
		{"echo.mjs", "none"},
	} {
		// Each is a full run of the kit, mostly waiting on leases and
		// processes: side by side, and beside the package's other tests.
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			passesTheKit(t, "node '"+filepath.Join(dir, "examples", c.file)+"'", c.capabilities)
		})
	}
}

// TestTypeScriptDocExample: the TypeScript forty lines on docs/adapter.md
// (its first js block) are sdk/typescript/examples/echo.mjs as it is.
func TestTypeScriptDocExample(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile(filepath.Join(tsDir, "examples", "echo.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/adapter.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?ms)^```js\n(.*?)^```\n").FindSubmatch(page)
	if m == nil || string(m[1]) != string(example) {
		t.Fatal("the first js block of docs/adapter.md is not sdk/typescript/examples/echo.mjs")
	}
}

// TestTypeScriptEchoOnce: the TypeScript echo agent, run with node and
// --once against a server, answers a person's question in the run's thread
// and exits once the run has ended (nothing of the SDK keeps Node alive).
func TestTypeScriptEchoOnce(t *testing.T) {
	t.Parallel()
	dir := tsReady(t)
	env := apitest.Start(t, apitest.Options{})
	m := env.MustPost("alex", env.Main("Support/Eskalation"), "ts-echo-1", "@lotse is the printer fixed?")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "examples", "echo.mjs"), "--once")
	cmd.Env = append(os.Environ(), "BOTHY_SERVER="+env.URL, "BOTHY_AGENT_TOKEN="+env.World.Token("lotse"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node echo.mjs --once: %v\n%s", err, out)
	}
	thread := env.Main("Support/Eskalation")
	if started, ok := m["started_thread"].(map[string]any); ok {
		thread = started["id"].(string)
	}
	got := answersIn(env, thread)
	if len(got) != 1 || !strings.HasPrefix(got[0], `You asked: "@lotse is the printer fixed?"`) || !strings.Contains(got[0], "least trusted element: ") {
		t.Fatalf("answers %q", got)
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`); n != 1 {
		t.Fatalf("%d completed runs", n)
	}
}
