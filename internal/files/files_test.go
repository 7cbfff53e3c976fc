package files_test

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/config"
	"bothy.example.com/bothy/internal/platform/problem"
)

// s3Storage starts an in-process S3 server with the bucket bothy-files and
// returns its files.storage URL.
func s3Storage(t *testing.T) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket("bothy-files"); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ACCESS_KEY_ID", "alex-example")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret-example")
	return "s3://bothy-files?region=us-east-1&use_path_style=true&endpoint=" + url.QueryEscape(srv.URL)
}

// TestFilesStorage: over the local folder and over S3, an upload stores
// its bytes and row, its uploader reads them back, a message attaches it,
// and the sweep deletes an unattached upload once files.orphan_ttl passed
// while it keeps the attached one. (Not parallel: t.Setenv.)
func TestFilesStorage(t *testing.T) {
	for name, storage := range map[string]string{"file": "", "s3": s3Storage(t)} {
		t.Run(name, func(t *testing.T) {
			cfg := map[string]string{config.FilesRequireScan: "false"}
			if storage != "" {
				cfg[config.FilesStorage] = storage
			}
			env := moduletest.Build(t, moduletest.Options{Config: cfg})
			fs := env.Modules.Files
			ctx := context.Background()
			alex := env.Principal("alex")
			content := []byte("Alex's notes, kept in " + name + "\n")
			kept, err := fs.Upload(ctx, alex, "kept.txt", bytes.NewReader(content))
			if err != nil {
				t.Fatal(err)
			}
			orphan, err := fs.Upload(ctx, alex, "orphan.txt", bytes.NewReader([]byte("never attached")))
			if err != nil {
				t.Fatal(err)
			}
			_, r, err := fs.Open(ctx, alex, kept.ID)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(r)
			r.Close()
			if !bytes.Equal(got, content) || kept.Size != int64(len(content)) || kept.MIMEType != "text/plain; charset=utf-8" {
				t.Fatalf("read back %q (%+v)", got, kept)
			}
			main := env.World.Channel("Support/Allgemein").MainThreadID
			if _, _, err := env.Messaging.Create(ctx, alex, main, messaging.Input{ClientMsgID: "s-1", ContentMD: "notes", AttachmentFileIDs: []string{kept.ID}}); err != nil {
				t.Fatal(err)
			}
			env.Clock.Advance(25 * time.Hour)
			if n, err := fs.Sweep(ctx); err != nil || n != 1 {
				t.Fatalf("sweep: %d %v", n, err)
			}
			if _, _, err := fs.Open(ctx, alex, orphan.ID); !problem.Is(err, problem.NotFound) {
				t.Fatalf("orphan after the sweep: %v", err)
			}
			if _, r, err := fs.Open(ctx, alex, kept.ID); err != nil {
				t.Fatalf("attached file after the sweep: %v", err)
			} else {
				r.Close()
			}
		})
	}
}

// TestFilesSweepsBlobsWithoutRows: a blob left by an upload that never
// committed its row is deleted once it is older than files.orphan_ttl, and
// not before (an upload may be writing it).
func TestFilesSweepsBlobsWithoutRows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := moduletest.Build(t, moduletest.Options{Config: map[string]string{config.FilesStorage: "file://" + dir}})
	ctx := context.Background()
	if _, err := env.Modules.Files.Upload(ctx, env.Principal("alex"), "real.txt", bytes.NewReader([]byte("real"))); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, "01a22d00-0000-7000-8000-000000000001")
	if err := os.WriteFile(stray, []byte("crashed upload"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := env.Modules.Files.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep of a fresh blob: %d %v", n, err)
	}
	old := env.Clock.Now().Add(-25 * time.Hour)
	if err := os.Chtimes(stray, old, old); err != nil {
		t.Fatal(err)
	}
	if n, err := env.Modules.Files.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep of an old blob without a row: %d %v", n, err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("the stray blob is still there: %v", err)
	}
}

// TestCleanName: names lose folders, control and format characters.
func TestCleanName(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"report.pdf":                           "report.pdf",
		`C:\Users\Sam\report.pdf`:              "report.pdf",
		"../../etc/passwd":                     "passwd",
		"inv\u202eoice.txt":                    "invoice.txt",
		"a\x00b\nc.txt":                        "abc.txt",
		"":                                     "file",
		"...":                                  "file",
		" spaced name .txt ":                   "spaced name .txt",
		string(bytes.Repeat([]byte("é"), 200)): string(bytes.Repeat([]byte("é"), 127)),
	} {
		if got := files.CleanName(raw); got != want {
			t.Errorf("CleanName(%q) = %q, want %q", raw, got, want)
		}
	}
}
