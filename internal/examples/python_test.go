package examples_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// pythonSDK returns the absolute paths of the repository's root and of the
// python of the Python SDK's virtualenv (make sdk-python makes it, with the
// locked packages and the SDK installed, as its users install it).
func pythonSDK(t *testing.T) (root, python string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	python = filepath.Join(root, "bin", "python-sdk", "bin", "python")
	if _, err := os.Stat(python); err != nil {
		t.Fatalf("no virtualenv of the Python SDK (%v): run make sdk-python first", err)
	}
	return root, python
}

// TestPythonSDKUnitTests runs the Python SDK's pytest suite (sdk/python/tests)
// with the virtualenv's python: any failure fails this test.
func TestPythonSDKUnitTests(t *testing.T) {
	t.Parallel()
	root, python := pythonSDK(t)
	// A backstop, not a measure: the suite takes 10 s alone and up to 90 s
	// beside make test's other packages on two cores (importing the
	// model libraries alone is 4 s of CPU).
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
	cmd.Dir = filepath.Join(root, "sdk", "python")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pytest: %v\n%s", err, out)
	}
}

// TestPythonExamplesPassTheKit: the Python SDK's examples, run with the
// virtualenv's python as their users run them, pass every scenario of the
// conformance kit that applies to the capabilities they declare (the model
// example model, live, tools, files and attach; the echo example none).
func TestPythonExamplesPassTheKit(t *testing.T) {
	t.Parallel()
	root, python := pythonSDK(t)
	for _, c := range []struct {
		file, capabilities string
	}{
		{"model.py", "model,live,tools,files,attach"},
		{"echo.py", "none"},
	} {
		// Each is a full run of the kit, mostly waiting on leases and
		// processes: side by side, and beside the package's other tests.
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			passesTheKit(t, "'"+python+"' '"+filepath.Join(root, "sdk", "python", "examples", c.file)+"'", c.capabilities)
		})
	}
}

// TestPythonFortyLinesInTheDocs: the first python block of docs/adapter.md
// is sdk/python/examples/echo.py as it is.
func TestPythonFortyLinesInTheDocs(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/adapter.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../sdk/python/examples/echo.py")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?ms)^```python\n(.*?)^```\n").FindSubmatch(page)
	if m == nil || string(m[1]) != string(example) {
		t.Fatal("the first python block of docs/adapter.md is not sdk/python/examples/echo.py")
	}
}

// TestPythonEchoOnce: the Python echo agent, run with --once against a
// server as docs/adapter.md says, answers a person's question in the run's
// thread and exits once the run has ended.
func TestPythonEchoOnce(t *testing.T) {
	t.Parallel()
	root, python := pythonSDK(t)
	env := apitest.Start(t, apitest.Options{})
	m := env.MustPost("alex", env.Main("Support/Eskalation"), "echo-py-1", "@lotse is the printer fixed?")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join(root, "sdk", "python", "examples", "echo.py"), "--once")
	cmd.Env = append(os.Environ(), "BOTHY_SERVER="+env.URL, "BOTHY_AGENT_TOKEN="+env.World.Token("lotse"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("echo.py --once: %v\n%s", err, out)
	}
	thread := env.Main("Support/Eskalation")
	if started, ok := m["started_thread"].(map[string]any); ok {
		thread = started["id"].(string)
	}
	got := answersIn(env, thread)
	if len(got) != 1 || !strings.HasPrefix(got[0], `You asked: '@lotse is the printer fixed?'`) || !strings.Contains(got[0], "least trusted element: TRIGGER") {
		t.Fatalf("answers %q", got)
	}
	if n := env.Count(`SELECT count(*) FROM runs WHERE state = 'completed'`); n != 1 {
		t.Fatalf("%d completed runs", n)
	}
}
