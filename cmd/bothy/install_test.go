package main

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/platform/pgcluster"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// readmeBlock returns the shell block of README.md between the markers
// <!-- name: ... --> and <!-- /name -->.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start := strings.Index(s, "<!-- "+name+":")
	end := strings.Index(s, "<!-- /"+name+" -->")
	if start < 0 || end < start {
		t.Fatalf("README.md has no block marked %s", name)
	}
	body := s[start:end]
	open := strings.Index(body, "```sh\n")
	closing := strings.LastIndex(body, "```")
	if open < 0 || closing <= open {
		t.Fatalf("README.md's %s block has no sh code", name)
	}
	return body[open+len("```sh\n") : closing]
}

// installation runs README.md's "Your own installation" block as it
// stands, with bash, against the test cluster as PostgreSQL's superuser
// (psql from the server binaries), with bin as bothy on PATH and a free
// port for 8080: from the role and the database to Sam's question and
// Lotse's answer read back over REST.
func installation(t *testing.T, bin string, base []string) {
	admin, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	binDir, err := pgcluster.FindBinaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(dir, "bothy")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	script := strings.ReplaceAll(readmeBlock(t, "installation"), "127.0.0.1:8080", addr)
	pass, _ := u.User.Password()
	host := u.Hostname()
	if h := u.Query().Get("host"); h != "" {
		host = h // a Unix socket directory
	}
	env := append(base, "PATH="+dir+":"+binDir+":"+os.Getenv("PATH"), "PGHOST="+host, "PGPORT="+u.Port(), "PGUSER="+u.User.Username(),
		"PGPASSWORD="+pass, "PGDATABASE="+strings.TrimPrefix(u.Path, "/"))
	t.Cleanup(func() {
		drop := exec.Command("psql", "-c", "DROP DATABASE IF EXISTS bothy WITH (FORCE)", "-c", "DROP ROLE IF EXISTS bothy")
		drop.Env = env
		_ = drop.Run()
	})
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "bothy.log"))
		t.Fatalf("README's installation: %v\n%s\nserver log:\n%s", err, out, log)
	}
	if !strings.Contains(string(out), `"kind":"run"`) || !strings.Contains(string(out), `You asked: \"@lotse hello\"`) {
		t.Fatalf("the thread read back holds no run and no answer of Lotse:\n%s", out)
	}
}
