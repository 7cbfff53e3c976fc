package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// TestUnknownEnvNamesTheNearest: only BOTHY_ variables that are neither a
// configuration key nor read by a Bothy program are reported, each with
// the known name nearest to it.
func TestUnknownEnvNamesTheNearest(t *testing.T) {
	t.Parallel()
	environ := []string{
		"PATH=/usr/bin", "HOME=/root", "BOTHYX=1", // not ours
		"BOTHY_DATABASE_URL=postgres://x", "BOTHY_AGENT_TOKEN=bothy_a_x", "BOTHY_MODEL_API_KEY=k",
		"BOTHY_TEST_DATABASE_URL=postgres://y", "BOTHY_LOG_LEVEL=info", // known
		"BOTHY_DATABSE_URL=postgres://secret", // a typo
		"BOTHY_LOGLEVEL=debug",                // a typo
		"BOTHY_AGENT_TOKN=bothy_a_y",          // a typo of a variable that is no key
		"BOTHY_METRICS_ADDRESS=:9090",         // a guess
		"BOTHY_SERVER=http://127.0.0.1:8080",  // known: bothy agent run's --server
		"BOTHY_SERVR=http://127.0.0.1:8080",   // a typo of it
		"BOTHY_=",
	}
	got := map[string]string{}
	for _, u := range unknownEnv(environ) {
		got[u.name] = u.nearest
	}
	want := map[string]string{
		"BOTHY_DATABSE_URL":     "BOTHY_DATABASE_URL",
		"BOTHY_LOGLEVEL":        "BOTHY_LOG_LEVEL",
		"BOTHY_AGENT_TOKN":      "BOTHY_AGENT_TOKEN",
		"BOTHY_METRICS_ADDRESS": "BOTHY_METRICS_ADDR",
		"BOTHY_SERVR":           "BOTHY_SERVER",
		"BOTHY_":                "",
	}
	delete(got, "BOTHY_") // nearest of an empty name: any short one
	delete(want, "BOTHY_")
	if len(got) != len(want) {
		t.Fatalf("unknown variables %v, want %v", got, want)
	}
	for name, nearest := range want {
		if got[name] != nearest {
			t.Errorf("%s: nearest %q, want %q", name, got[name], nearest)
		}
	}
	if got := unknownEnv([]string{"BOTHY_=x"}); len(got) != 1 {
		t.Errorf("BOTHY_ alone: %v, want it reported", got)
	}
}

// TestUnknownEnvWarningIsJSON: the warning is one JSON log line per
// variable, naming the variable and its nearest known name, never the
// value (it may be a password).
func TestUnknownEnvWarningIsJSON(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	warnUnknownEnv(&buf, []string{"BOTHY_DATABSE_URL=postgres://bothy:hunter2@db/bothy", "BOTHY_LOG_LEVEL=info"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line, got:\n%s", buf.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatalf("not JSON: %q", lines[0])
	}
	if m["level"] != "WARN" || m["msg"] != unknownEnvMsg || m["variable"] != "BOTHY_DATABSE_URL" || m["nearest"] != "BOTHY_DATABASE_URL" {
		t.Fatalf("warning %v", m)
	}
	if strings.Contains(buf.String(), "hunter2") {
		t.Fatal("the warning shows the value")
	}
}

// TestEditDistance checks the distance the nearest name is chosen by.
func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"BOTHY_DATABSE_URL", "BOTHY_DATABASE_URL", 1}, {"abc", "abc", 0}, {"ab", "ba", 2}} {
		if got := editDistance(c.a, c.b); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
		if got := editDistance(c.b, c.a); got != c.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.b, c.a, got, c.d)
		}
	}
}

// testProgramEnv are BOTHY_ variables that only the test of
// internal/devtools/clientflow sets, for the client programs of its testdata; no
// bothy command runs with them, and counting BOTHY_URL as known would hide
// the likeliest mistake for BOTHY_DATABASE_URL.
var testProgramEnv = map[string]bool{"BOTHY_URL": true, "BOTHY_ALEX": true, "BOTHY_LOTSE": true, "BOTHY_THREAD": true}

// TestKnownEnvCoversTheRepository greps the repository for BOTHY_ names:
// each is a configuration key, a variable the warning knows, or one of the
// test programs' own. A new variable read anywhere must be added to
// otherEnv (main), or every command would warn about it.
func TestKnownEnvCoversTheRepository(t *testing.T) {
	t.Parallel()
	if !knownEnv()[pgtest.EnvURL] {
		t.Errorf("%s (pgtest.EnvURL) is not known", pgtest.EnvURL)
	}
	for _, k := range config.Registry() {
		if !knownEnv()[config.EnvName(k.Name)] {
			t.Errorf("%s (config key %s) is not known", config.EnvName(k.Name), k.Name)
		}
	}
	// found maps each name to a file that uses it, apart from the list of
	// known names (envcheck.go) and this package's tests, which use
	// misspelt names on purpose.
	found := bothyNamesInRepository(t, filepath.Join("..", ".."))
	known := knownEnv()
	var missing []string
	for n, path := range found {
		if !known[n] && !testProgramEnv[n] {
			missing = append(missing, n+" (in "+path+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("BOTHY_ names in the repository that the unknown-variable warning would report: %s; add what a Bothy program reads to otherEnv in cmd/bothy/envcheck.go", strings.Join(missing, ", "))
	}
	for n := range testProgramEnv {
		if _, ok := found[n]; !ok {
			t.Errorf("%s is no longer used: remove it from testProgramEnv", n)
		}
	}
	for _, n := range otherEnv {
		if _, ok := found[n]; !ok {
			t.Errorf("%s is read nowhere any more: remove it from otherEnv", n)
		}
	}
}

// bothyNamesInRepository walks the repository at root and maps each BOTHY_
// name in its files to a file that uses it, apart from the list of known
// names (envcheck.go) and this package's tests, which use misspelt names on
// purpose; it skips directories of tools and builds, large and binary files.
func bothyNamesInRepository(t *testing.T, root string) map[string]string {
	t.Helper()
	name := regexp.MustCompile(`BOTHY_[A-Z0-9_]*[A-Z0-9]`)
	found := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "bin", "dist", ".bothy-dev":
				return filepath.SkipDir
			}
			return nil
		}
		if filepath.Dir(path) == filepath.Join(root, "cmd", "bothy") && (d.Name() == "envcheck.go" || strings.HasSuffix(d.Name(), "_test.go")) {
			return nil
		}
		data, err := readTextFile(path, d)
		if err != nil || data == nil {
			return err
		}
		for _, n := range name.FindAllString(string(data), -1) {
			if _, ok := found[n]; !ok {
				found[n] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// readTextFile reads the regular file d at path if it is at most 4 MiB
// and holds no NUL byte; otherwise it returns nil data (and any error).
func readTextFile(path string, d fs.DirEntry) ([]byte, error) {
	info, err := d.Info()
	if err != nil || info.Size() > 4<<20 || !info.Mode().IsRegular() {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil || bytes.IndexByte(data, 0) >= 0 {
		return nil, err
	}
	return data, nil
}
