package main

import (
	"path/filepath"
	"testing"

	"bothy.example.com/bothy/internal/platform/config"
)

// TestDevFilesDefaults: bothy dev keeps files in its data folder and serves
// files no scanner checked, unless the developer set either key.
func TestDevFilesDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := devFiles(config.Defaults(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.String(config.FilesStorage), "file://"+filepath.ToSlash(filepath.Join(dir, "files")); got != want || cfg.Bool(config.FilesRequireScan) {
		t.Fatalf("dev defaults: files.storage %q (want %q), files.require_scan %v", got, want, cfg.Bool(config.FilesRequireScan))
	}
	set, err := config.Load("", []string{"BOTHY_FILES_STORAGE=s3://bothy-files?region=us-east-1", "BOTHY_FILES_REQUIRE_SCAN=true"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = devFiles(set, dir); err != nil || cfg.String(config.FilesStorage) != "s3://bothy-files?region=us-east-1" || !cfg.Bool(config.FilesRequireScan) {
		t.Fatalf("dev changed what the developer set: %v %q %v", err, cfg.String(config.FilesStorage), cfg.Bool(config.FilesRequireScan))
	}
}
