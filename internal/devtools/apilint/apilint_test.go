package apilint

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// document is the OpenAPI document under lint, relative to this folder.
const document = "../../../docs/api/openapi.yaml"

// quietEnv keeps the linters on this machine: no telemetry, no update check.
func quietEnv() []string {
	return append(os.Environ(),
		"REDOCLY_TELEMETRY=off",
		"REDOCLY_SUPPRESS_UPDATE_NOTICE=true",
		"NO_UPDATE_NOTIFIER=1",
	)
}

// tool returns the path of an installed linter binary, failing the test with
// what to run when install.sh has not run.
func tool(t *testing.T, name string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: install Node.js and npm, then run internal/devtools/apilint/install.sh")
	}
	p, _ := filepath.Abs(filepath.Join("node_modules", ".bin", name))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run internal/devtools/apilint/install.sh (make test does)", name)
	}
	return p
}

// TestRedoclyLint: redocly lint (recommended rules) finds no error and no
// warning in the document.
func TestRedoclyLint(t *testing.T) {
	cmd := exec.Command(tool(t, "redocly"), "lint", "--format=json", document)
	cmd.Env = quietEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // exit status is 1 on errors; the JSON says all
	var res struct {
		Totals struct {
			Errors, Warnings int
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("redocly output is not JSON: %v\n%s\n%s", err, out, stderr.String())
	}
	for _, p := range res.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		t.Errorf("redocly %s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	if res.Totals.Errors != 0 || res.Totals.Warnings != 0 {
		t.Fatalf("redocly: %d errors, %d warnings", res.Totals.Errors, res.Totals.Warnings)
	}
}

// TestSpectralLint: spectral lint with the spectral:oas ruleset
// (.spectral.yaml) finds nothing of any severity in the document.
func TestSpectralLint(t *testing.T) {
	cmd := exec.Command(tool(t, "spectral"), "lint", "--ruleset", ".spectral.yaml", "--format", "json", "--quiet", document)
	cmd.Env = quietEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // exit status is 1 on errors; the JSON says all
	var res []struct {
		Code     string   `json:"code"`
		Message  string   `json:"message"`
		Severity int      `json:"severity"`
		Path     []string `json:"path"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
		t.Fatalf("spectral output is not JSON: %v\n%s\n%s", err, out, stderr.String())
	}
	// Severity: 0 error, 1 warning, 2 info, 3 hint; none is accepted.
	for _, r := range res {
		t.Errorf("spectral severity %d %s at %v: %s", r.Severity, r.Code, r.Path, r.Message)
	}
}
