package files_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/files/clamd/clamdtest"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
)

// scanned builds modules whose uploads go to a fake clamd.
func scanned(t *testing.T, extra map[string]string) (*moduletest.Env, *clamdtest.Server) {
	t.Helper()
	clam := clamdtest.NewServer()
	t.Cleanup(clam.Close)
	cfg := map[string]string{config.FilesClamdAddr: clam.Addr(), config.FilesClamdTimeout: "5s"}
	for k, v := range extra {
		cfg[k] = v
	}
	return moduletest.Build(t, moduletest.Options{Config: cfg}), clam
}

// TestFilesScanAndExtract: with a scanner, a clean upload is scanned
// (pending to clean in the upload) and its text extracted (READY), which
// its uploader reads; the EICAR file is infected, never served and never
// extracted; a scanner that fails leaves the file failed and withheld.
// The scans are counted by verdict.
func TestFilesScanAndExtract(t *testing.T) {
	t.Parallel()
	env, clam := scanned(t, nil)
	fs, ctx, alex := env.Modules.Files, context.Background(), env.Principal("alex")

	checkCleanUpload(t, env)
	checkInfectedUpload(t, env)

	clam.SetMode(clamdtest.Fail)
	failed, err := fs.Upload(ctx, alex, "later.txt", strings.NewReader("scanned by nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if failed.ScanStatus != files.ScanFailed || failed.TextStatus != files.TextFailed {
		t.Fatalf("upload while the scanner fails: %+v", failed)
	}
	if _, _, err := fs.Open(ctx, alex, failed.ID); !problem.Is(err, problem.NotFound) {
		t.Fatalf("failed scan's bytes: %v", err)
	}
	if total, infected := clam.Scans(); total != 2 || infected != 1 {
		t.Fatalf("fake clamd saw %d scans, %d infected", total, infected)
	}
	for _, verdict := range []string{"clean", "infected", "failed"} {
		if n := env.Metric(`bothy_file_scans_total{verdict="` + verdict + `"}`); n != 1 {
			t.Errorf("scans %s: %v, want 1", verdict, n)
		}
	}
	if got, err := testutil.GatherAndCount(env.Modules.Registry, "bothy_file_scan_duration_seconds"); err != nil || got != 1 {
		t.Fatalf("scan latency histogram: %d %v", got, err)
	}
}

// checkCleanUpload uploads a clean file as alex: it is scanned clean and
// its text extracted, which alex reads whole and cut.
func checkCleanUpload(t *testing.T, env *moduletest.Env) {
	t.Helper()
	fs, ctx, alex := env.Modules.Files, context.Background(), env.Principal("alex")
	clean, err := fs.Upload(ctx, alex, "notes.md", strings.NewReader("# Notes\nSam owes Robin a coffee.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if clean.ScanStatus != files.ScanClean || clean.TextStatus != files.TextReady {
		t.Fatalf("clean upload: %+v", clean)
	}
	txt, err := fs.ReadText(ctx, alex, clean.ID, 0)
	if err != nil || txt.Text != "# Notes\nSam owes Robin a coffee.\n" || txt.Truncated {
		t.Fatalf("text: %+v %v", txt, err)
	}
	if cut, err := fs.ReadText(ctx, alex, clean.ID, 9); err != nil || cut.Text != "# Notes\nS" || !cut.Truncated {
		t.Fatalf("text cut at 9: %+v %v", cut, err)
	}
}

// checkInfectedUpload uploads the EICAR file as alex: it is infected, its
// bytes and text are never served, and no text is stored.
func checkInfectedUpload(t *testing.T, env *moduletest.Env) {
	t.Helper()
	fs, ctx, alex := env.Modules.Files, context.Background(), env.Principal("alex")
	bad, err := fs.Upload(ctx, alex, "eicar.txt", bytes.NewReader(clamdtest.EICAR()))
	if err != nil {
		t.Fatal(err)
	}
	if bad.ScanStatus != files.ScanInfected || bad.TextStatus != files.TextFailed {
		t.Fatalf("EICAR upload: %+v", bad)
	}
	if _, _, err := fs.Open(ctx, alex, bad.ID); !problem.Is(err, problem.NotFound) {
		t.Fatalf("infected bytes: %v", err)
	}
	if _, err := fs.ReadText(ctx, alex, bad.ID, 0); !problem.Is(err, problem.NotFound) {
		t.Fatalf("infected text: %v", err)
	}
	if n := env.Count(`SELECT count(*) FROM stored_files WHERE id = $1 AND text_content IS NULL`, bad.ID); n != 1 {
		t.Fatal("the infected file's text was stored")
	}
}

// TestFilesRequireScanWithoutScanner: without a scanner an upload is
// not_scanned; while files.require_scan is on it is withheld and never
// extracted, and with it off it is served and its text extracted.
func TestFilesRequireScanWithoutScanner(t *testing.T) {
	t.Parallel()
	for _, require := range []string{"true", "false"} {
		env := moduletest.Build(t, moduletest.Options{Config: map[string]string{config.FilesRequireScan: require}})
		fs, ctx, alex := env.Modules.Files, context.Background(), env.Principal("alex")
		f, err := fs.Upload(ctx, alex, "plain.txt", strings.NewReader("plain words"))
		if err != nil {
			t.Fatal(err)
		}
		_, textErr := fs.ReadText(ctx, alex, f.ID, 0)
		if require == "true" {
			if f.ScanStatus != files.ScanNotScanned || f.TextStatus != files.TextFailed || !problem.Is(textErr, problem.NotFound) {
				t.Fatalf("required scan, no scanner: %+v %v", f, textErr)
			}
			continue
		}
		if f.ScanStatus != files.ScanNotScanned || f.TextStatus != files.TextReady || textErr != nil {
			t.Fatalf("no scan required: %+v %v", f, textErr)
		}
	}
}

// TestFilesSweepFinishesPending: a file a crash left pending (scan and
// text) is scanned and extracted by the sweep once it is older than any
// request, and not before.
func TestFilesSweepFinishesPending(t *testing.T) {
	t.Parallel()
	env, _ := scanned(t, nil)
	fs, ctx, alex := env.Modules.Files, context.Background(), env.Principal("alex")
	f, err := fs.Upload(ctx, alex, "crash.txt", strings.NewReader("text the crash left"))
	if err != nil {
		t.Fatal(err)
	}
	env.Exec(`UPDATE stored_files SET scan_status = 'pending', text_status = 'pending', text_content = NULL WHERE id = $1`, f.ID)
	if _, err := fs.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if n := env.Count(`SELECT count(*) FROM stored_files WHERE id = $1 AND scan_status = 'pending'`, f.ID); n != 1 {
		t.Fatal("the sweep took up a fresh pending file")
	}
	env.Clock.Advance(20 * time.Minute)
	if _, err := fs.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	txt, err := fs.ReadText(ctx, alex, f.ID, 0)
	if err != nil || txt.Text != "text the crash left" || txt.File.ScanStatus != files.ScanClean {
		t.Fatalf("after the sweep: %+v %v", txt, err)
	}
}

// TestFilesSweepAuditsDeletions: the sweep's deletion of a file is in the
// audit log as file.delete by the system actor (answered as "operator").
func TestFilesSweepAuditsDeletions(t *testing.T) {
	t.Parallel()
	env := moduletest.Build(t, moduletest.Options{})
	fs, ctx := env.Modules.Files, context.Background()
	f, err := fs.Upload(ctx, env.Principal("sam"), "orphan.txt", strings.NewReader("never attached"))
	if err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(25 * time.Hour)
	if n, err := fs.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE action = 'file.delete' AND decision = 'allow'
		AND actor_id = '00000000-0000-0000-0000-000000000000' AND resource_kind = 'file' AND resource_id = $1`, f.ID); n != 1 {
		t.Fatalf("audit rows of the deletion: %d", n)
	}
}

// TestCutText: text is cut at a character boundary.
func TestCutText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"abc", 5, "abc", false},
		{"abc", 3, "abc", false},
		{"abc", 2, "ab", true},
		{"aé", 2, "a", true},
		{"é", 1, "", true},
		{"€uro", 3, "€", true},
		{"€uro", 2, "", true},
	} {
		if got, cut := files.CutText(c.in, c.max); got != c.want || cut != c.cut {
			t.Errorf("CutText(%q, %d) = %q %v", c.in, c.max, got, cut)
		}
	}
}
