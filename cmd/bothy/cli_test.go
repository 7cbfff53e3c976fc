package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryHelp: --help of every command prints help and succeeds; none of
// them runs the command (config markdown --help does not print the document).
func TestEveryHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"serve", "--help"}, {"dev", "--help"}, {"migrate", "--help"}, {"migrate", "status", "--help"}, {"seed", "--help"},
		{"token", "--help"}, {"token", "create", "--help"}, {"agent", "--help"}, {"agent", "run", "--help"},
		{"config", "--help"}, {"config", "markdown", "--help"}, {"config", "markdown", "-h"}, {"documents", "--help"}, {"conformance", "--help"},
		{"bench", "--help"}, {"bench"}, {"bench", "injection", "--help"}, {"bench", "capacity", "--help"}, {"login", "--help"}, {"logout", "--help"}, {"token", "show", "--help"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		help := out.String() + errOut.String()
		if !strings.Contains(help, "Usage") && !strings.Contains(help, "usage") {
			t.Fatalf("%v printed no usage:\n%s", args, help)
		}
		if strings.Contains(help, "| key |") || strings.Contains(help, "database.max_conns") && args[0] == "config" {
			t.Fatalf("%v printed the configuration document", args)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"config", "markdown"}, &out, &out); err != nil || !strings.Contains(out.String(), "database.url") {
		t.Fatalf("config markdown: %v %.200s", err, out.String())
	}
}

// TestConformanceHelp: bothy conformance --help lists every variable the
// kit sets for the adapter and the one it reads itself, each with its
// line, and every capability an adapter may declare.
func TestConformanceHelp(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"conformance", "--help"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	help := out.String() + errOut.String()
	for _, want := range []string{
		"BOTHY_SERVER             the kit's server",
		"BOTHY_AGENT_TOKEN        the API token of the agent Lotse",
		"BOTHY_MODEL_BASE_URL     the fake model's API root",
		"BOTHY_MODEL_API_KEY      a key for the fake model",
		"BOTHY_MODEL_NAME         the model to ask for",
		"BOTHY_TOOLS              the kit's tools file",
		"BOTHY_CONFORMANCE_TOOLS  the same tools file",
		"Read by the kit itself:\n  BOTHY_CONFORMANCE_DEBUG  when set, the adapter's output goes to the kit's stderr",
		"Capabilities (--capabilities):\n  model   it asks a model at BOTHY_MODEL_BASE_URL\n  live    it streams",
		"\n  tools   it runs the tools of BOTHY_TOOLS", "\n  files   it reads the text of attached files, as data",
		"\n  attach  it attaches files to its answers",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("the help lacks %q:\n%s", want, help)
		}
	}
}

// TestDevDataFolder: while a bothy dev holds its data folder, a second start
// refuses with what to do, and migrate/seed/token find the running dev
// database there; without a running dev they say how to get one.
func TestDevDataFolder(t *testing.T) {
	t.Setenv("BOTHY_DATABASE_URL", "")
	dir := t.TempDir()
	// No dev server: the commands explain what to do.
	var out bytes.Buffer
	err := run(context.Background(), []string{"migrate", "--data", dir}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "no bothy dev runs on the data folder "+dir) || !strings.Contains(err.Error(), "bin/bothy dev") {
		t.Fatalf("migrate without a dev server: %v", err)
	}
	// A URL file left by a crash does not count without the lock.
	if err := os.WriteFile(filepath.Join(dir, devURLName), []byte("postgres://127.0.0.1:1/bothy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := devDatabaseURL(dir); err == nil {
		t.Fatal("a stale database.url was used")
	}
	// A running dev server (its lock held here) is found.
	lock, err := lockDevData(dir)
	if err != nil {
		t.Fatal(err)
	}
	lock.announce("http://127.0.0.1:8080")
	if u, err := devDatabaseURL(dir); err != nil || u != "postgres://127.0.0.1:1/bothy" {
		t.Fatalf("devDatabaseURL = %q, %v", u, err)
	}
	// A second start refuses, naming the running one and what to do.
	err = run(context.Background(), []string{"dev", "--data", dir, "--addr", "127.0.0.1:0"}, &out, &out)
	if err == nil {
		t.Fatal("a second dev start on a busy folder succeeded")
	}
	for _, want := range []string{"in use by another bothy dev (pid ", "http://127.0.0.1:8080", "Ctrl-C", "--data"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("second start: %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "pg_ctl") {
		t.Fatalf("second start suggests pg_ctl: %v", err)
	}
	// The refused start left the running server's files alone.
	if b, _ := os.ReadFile(filepath.Join(dir, devURLName)); string(b) != "postgres://127.0.0.1:1/bothy\n" {
		t.Fatalf("database.url changed: %q", b)
	}
	lock.release()
	if l, err := lockDevData(dir); err != nil {
		t.Fatalf("the folder stays locked after release: %v", err)
	} else {
		l.release()
	}
}
