package clientflow

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// genDir makes a temporary package folder below this one (its name starts
// with "_", so ./... never sees it) with the driver of testdata/kind, and
// removes it after the test. It must sit inside the module so the generated
// code builds with the module's pinned dependencies.
func genDir(t *testing.T, kind string) string {
	t.Helper()
	dir, err := os.MkdirTemp(".", "_gen-"+kind+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	entries, err := os.ReadDir(filepath.Join("testdata", kind))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata", kind, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// run runs name with args in dir and returns its output, failing the test
// on a non-zero exit.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// flowEnv starts a server and returns what the drivers read from the
// environment.
func flowEnv(t *testing.T) (*apitest.Env, []string) {
	env := apitest.Start(t, apitest.Options{})
	return env, []string{
		"BOTHY_URL=" + env.URL,
		"BOTHY_ALEX=" + env.World.Token("alex"),
		"BOTHY_LOTSE=" + env.World.Token("lotse"),
		"BOTHY_THREAD=" + env.Main("Support/Allgemein"),
	}
}

// checkFlow asserts in the database what the driver did: the run completed
// and Lotse's answer is in the run's thread.
func checkFlow(t *testing.T, env *apitest.Env, out string) {
	t.Helper()
	f := strings.Fields(strings.TrimSpace(out))
	if len(f) < 2 || f[len(f)-2] != "ok" {
		t.Fatalf("driver output: %s", out)
	}
	runID := f[len(f)-1]
	if n := env.Count(`SELECT count(*) FROM runs WHERE id = $1 AND state = 'completed'`, runID); n != 1 {
		t.Fatalf("run %s is not completed", runID)
	}
	if n := env.Count(`SELECT count(*) FROM messages m JOIN runs r ON r.thread_id = m.thread_id JOIN principals p ON p.id = m.author_principal_id
		WHERE r.id = $1 AND p.handle = 'lotse' AND m.kind = 'text' AND m.content_md LIKE 'Lotse here: %'`, runID); n != 1 {
		t.Fatalf("lotse's answer with run %s: %d", runID, n)
	}
}

// TestGenqlientClientFlow generates a genqlient client from
// schema/*.graphqls and testdata/graphql/operations.graphql and drives the
// core flow through it.
func TestGenqlientClientFlow(t *testing.T) {
	t.Parallel()
	env, vars := flowEnv(t)
	dir := genDir(t, "graphql")
	schema, _ := filepath.Abs("../../../schema")
	cfg := "schema: " + schema + "/*.graphqls\n" +
		"operations:\n  - operations.graphql\n" +
		"generated: generated.go\npackage: main\n" +
		// Optional inputs are pointers: nil is sent as null, which Bothy
		// reads as none (an empty string would be refused).
		"optional: pointer\n" +
		"bindings:\n  Time:\n    type: time.Time\n  JSON:\n    type: encoding/json.RawMessage\n"
	if err := os.WriteFile(filepath.Join(dir, "genqlient.yaml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, "go", "tool", "genqlient", "genqlient.yaml")
	checkFlow(t, env, run(t, dir, vars, "go", "run", "."))
}

// TestOapiCodegenClientFlow generates an oapi-codegen client from
// docs/api/openapi.yaml and drives the core flow through the REST shim.
func TestOapiCodegenClientFlow(t *testing.T) {
	t.Parallel()
	env, vars := flowEnv(t)
	dir := genDir(t, "openapi")
	doc, _ := filepath.Abs("../../../docs/api/openapi.yaml")
	run(t, dir, nil, "go", "tool", "oapi-codegen", "-generate", "types,client", "-package", "main", "-o", "client.go", doc)
	checkFlow(t, env, run(t, dir, vars, "go", "run", "."))
}
