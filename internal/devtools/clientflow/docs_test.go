package clientflow

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/devtools/gobuild"
	"bothy.example.com/bothy/internal/trusteddocs"
)

// shBlock matches a fenced sh block of a Markdown page.
var shBlock = regexp.MustCompile("(?ms)^```sh\n(.*?)^```\n")

// callsBothy matches a block with a line that runs bothy.
var callsBothy = regexp.MustCompile(`(?m)^\s*bothy\s`)

// TestClientsDocCommands runs every sh block of docs/clients.md, in order,
// in one empty folder outside the module, against a test server, as the
// page says a client author would: CHAT_URL and CHAT_TOKEN set, the
// client's operations in operations.graphql and its Go program
// (testdata/docs, which selects Time and JSON fields and omits optional
// inputs) beside them, bothy on the PATH. Then it checks what the blocks
// made: the generated Go packages built (the page's own go build), the Go
// program runs against the server, the TypeScript declarations, the
// trusted-documents file, and the Apollo client's output as the page
// quotes it.
func TestClientsDocCommands(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlock.FindAllStringSubmatch(string(page), -1)
	if len(blocks) < 7 {
		t.Fatalf("docs/clients.md has %d sh blocks, want the contract, genqlient, oapi-codegen, openapi-typescript, Apollo and trusted documents", len(blocks))
	}
	dir := t.TempDir()
	bin, build := startBothyBuild(t)
	// A test that stops early still waits, so the build's output is not
	// removed under it.
	defer build.wait()
	env := apitest.Start(t, apitest.Options{})
	// Events for the Apollo client's two pages.
	for i := range 4 {
		env.MustPost("alex", env.Main("Support/Allgemein"), fmt.Sprintf("doc-%d", i), "events for the client page")
	}
	ops := writeClientFiles(t, dir)
	vars := []string{
		"CHAT_URL=" + env.URL,
		"CHAT_TOKEN=" + env.World.Token("alex"),
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		// A folder outside this module: its own go.mod, no workspace.
		"GOWORK=off", "GOFLAGS=",
		// npm takes what its cache holds and asks the registry for the rest.
		"npm_config_prefer_offline=true", "npm_config_update_notifier=false",
	}
	out := runDocBlocks(t, blocks, dir, vars, build)
	for _, f := range []string{"bothy/generated.go", "bothyrest/client.go", "bothy-api.d.ts", "possible-types.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s was not made: %v", f, err)
		}
	}
	// The program ran after the Apollo client: its post is no event of
	// the Apollo client's pages.
	if got := run(t, dir, vars, "go", "run", "."); !strings.HasPrefix(got, "recipe ok ") {
		t.Errorf("the Go program of testdata/docs printed %q", got)
	}
	const quoted = "events 4 hash-only requests 2"
	if !strings.Contains(string(page), "`"+quoted+"`") || !strings.Contains(out, quoted) {
		t.Errorf("the Apollo client printed other than the page says (%q):\n%s", quoted, out)
	}
	checkTrustedDocuments(t, filepath.Join(dir, "trusted-documents.txt"), ops)
}

// bothyBuild is a go build of bothy running in the background.
type bothyBuild struct {
	cmd   *exec.Cmd
	out   strings.Builder
	built bool
}

// startBothyBuild starts building bothy into a folder kept between runs
// (gobuild: linked only when its code changed) and returns a folder that
// holds it as "bothy", for the blocks' PATH: a folder of its own, so that
// only bothy is added to their PATH. Linking takes seconds and only the
// blocks that run bothy need it: it links while the server starts and the
// blocks before run. When make test built bothy already
// (gobuild.EnvBothy), the folder holds a link to that binary.
func startBothyBuild(t *testing.T) (string, *bothyBuild) {
	t.Helper()
	if built := os.Getenv(gobuild.EnvBothy); built != "" {
		dir := t.TempDir()
		if err := os.Symlink(built, filepath.Join(dir, "bothy")); err != nil {
			t.Fatal(err)
		}
		return dir, &bothyBuild{built: true}
	}
	target, err := gobuild.Target(gobuild.Bothy)
	if err != nil {
		t.Fatal(err)
	}
	b := &bothyBuild{cmd: gobuild.Command(context.Background(), target, gobuild.Bothy)}
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.out
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(target), b
}

// wait waits for the build the first time it is called and returns its
// error; later calls return nil at once.
func (b *bothyBuild) wait() error {
	if b.built {
		return nil
	}
	b.built = true
	return b.cmd.Wait()
}

// writeClientFiles writes the client's operations and Go program (testdata)
// into dir and returns the operations.
func writeClientFiles(t *testing.T, dir string) []byte {
	t.Helper()
	ops, err := os.ReadFile("testdata/graphql/operations.graphql")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile("testdata/docs/main.go")
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"operations.graphql": ops, "main.go": prog} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ops
}

// runDocBlocks runs each sh block in dir with vars added to the
// environment, in order, waiting for build before the first that runs
// bothy, and returns their output; a failing block ends the test.
func runDocBlocks(t *testing.T, blocks [][]string, dir string, vars []string, build *bothyBuild) string {
	t.Helper()
	var out strings.Builder
	for i, b := range blocks {
		if callsBothy.MatchString(b[1]) {
			if err := build.wait(); err != nil {
				t.Fatalf("go build bothy: %v\n%s", err, build.out.String())
			}
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", b[1])
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), vars...)
		start := time.Now()
		got, err := cmd.CombinedOutput()
		t.Logf("block %d: %v", i+1, time.Since(start).Round(time.Millisecond))
		if err != nil {
			t.Fatalf("block %d of docs/clients.md failed: %v\n%s\n--- output:\n%s", i+1, err, b[1], got)
		}
		out.Write(got)
	}
	return out.String()
}

// checkTrustedDocuments checks that the trusted-documents file at path
// parses and holds one hash per query and mutation of ops.
func checkTrustedDocuments(t *testing.T, path string, ops []byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, err := trusteddocs.Parse(f)
	if err != nil || len(set) != strings.Count(string(ops), "\nquery ")+strings.Count(string(ops), "\nmutation ") {
		t.Errorf("trusted-documents.txt: %d hashes, err %v", len(set), err)
	}
}
