package server_test

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/files/clamd/clamdtest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/server"
)

// scannerLog returns the log lines of the start's clamd check.
func scannerLog(t *testing.T, logs *apitest.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range logs.Lines(t) {
		if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "files: clamd") {
			out = append(out, l)
		}
	}
	return out
}

// absentAddr returns a tcp:// address on 127.0.0.1 where nothing listens:
// a port that was free a moment ago, closed again.
func absentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "tcp://" + ln.Addr().String()
	ln.Close()
	return addr
}

// TestScannerCheckedAtStart: the server PINGs files.clamd_addr as it
// starts. A fake clamd that answers is logged at info and scans the first
// upload clean; an address where nothing listens, and a clamd that accepts
// and never answers, are logged as an error naming the address, and the
// server still starts, ready, with the upload scanned failed (the scanner
// may come back); an address that answers but is not clamd, and one with a
// scheme clamd has not, stop the start with an error naming
// files.clamd_addr.
func TestScannerCheckedAtStart(t *testing.T) {
	t.Parallel()
	t.Run("answers", func(t *testing.T) {
		t.Parallel()
		clam := clamdtest.NewServer()
		t.Cleanup(clam.Close)
		logs := &apitest.Buffer{}
		env := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)),
			Config: map[string]string{config.FilesClamdAddr: clam.Addr()}})
		lines := scannerLog(t, logs)
		if len(lines) != 1 || lines[0]["level"] != "INFO" || lines[0]["clamd_addr"] != clam.Addr() {
			t.Fatalf("start log %v, want one INFO line naming %s", lines, clam.Addr())
		}
		if got := uploadStatus(t, env); got != "clean" {
			t.Errorf("upload scan_status %q, want clean", got)
		}
	})
	// Absent: nothing listens. Hanging: something accepts and never
	// answers, which files.clamd_timeout (1s here) ends.
	for name, addr := range map[string]func(t *testing.T) string{
		"absent": absentAddr,
		"hanging": func(t *testing.T) string {
			clam := clamdtest.NewServer()
			t.Cleanup(clam.Close)
			clam.SetMode(clamdtest.Hang)
			return clam.Addr()
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			startsWithoutScanner(t, addr(t))
		})
	}
	for name, addr := range map[string]func(t *testing.T) string{
		"not clamd": func(t *testing.T) string {
			clam := clamdtest.NewServer()
			t.Cleanup(clam.Close)
			clam.SetMode(clamdtest.Garbage)
			return clam.Addr()
		},
		"bad scheme": func(*testing.T) string { return "http://clamd.example.com:3310" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := addr(t)
			m := moduletest.Build(t, apitest.Options{Config: map[string]string{config.FilesClamdAddr: a}})
			_, err := server.New(server.Deps{Config: m.Config, Pool: m.Pool, DatabaseURL: m.PoolURL, Clock: m.Clock, Logger: m.Log, Modules: m.Modules})
			if err == nil || !strings.Contains(err.Error(), "files.clamd_addr") || !strings.Contains(err.Error(), a) {
				t.Fatalf("server.New with files.clamd_addr %s: %v, want an error naming it", a, err)
			}
		})
	}
}

// uploadStatus uploads a small file as Alex and returns its scan_status.
func uploadStatus(t *testing.T, env *apitest.Env) string {
	t.Helper()
	r := upload(t, env, "alex", "notes.txt", []byte("The printer on floor 2 needs toner.\n"))
	var up map[string]any
	if err := json.Unmarshal(r.Body, &up); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	s, _ := up["scan_status"].(string)
	return s
}

// startsWithoutScanner starts a server whose files.clamd_addr is addr, a
// clamd that does not answer: the start logs an error naming the address
// and goes on, /readyz answers 200 and an upload is scanned failed.
func startsWithoutScanner(t *testing.T, addr string) {
	t.Helper()
	logs := &apitest.Buffer{}
	env := apitest.Start(t, apitest.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)),
		Config: map[string]string{config.FilesClamdAddr: addr, config.FilesClamdTimeout: "1s"}})
	lines := scannerLog(t, logs)
	if len(lines) != 1 || lines[0]["level"] != "ERROR" || lines[0]["clamd_addr"] != addr || lines[0]["err"] == nil {
		t.Fatalf("start log %v, want one ERROR line naming %s and the error", lines, addr)
	}
	// Readiness does not follow the scanner: the chat serves.
	if r := env.REST(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("/readyz %d %s, want 200", r.Status, r.Body)
	}
	if got := uploadStatus(t, env); got != "failed" {
		t.Errorf("upload scan_status %q, want failed", got)
	}
}
