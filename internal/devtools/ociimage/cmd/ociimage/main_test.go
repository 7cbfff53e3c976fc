package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// staticBinary builds a tiny static Linux Go program (a fraction of a
// second with the standard library cached) to stand in for bothy: the
// command checks that its binary is a static Linux Go build.
func staticBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module example.com/tiny\n\ngo 1.26\n",
		"main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bothy")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	// GOWORK and GOFLAGS of the caller's module must not reach this one;
	// GOTOOLCHAIN=local: nothing is downloaded.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestRun writes the layout and the docker-archive tarball of a static
// binary under the name REPOSITORY:VERSION, with the time of
// SOURCE_DATE_EPOCH.
func TestRun(t *testing.T) {
	bin := staticBinary(t)
	out := filepath.Join(t.TempDir(), "image")
	tarFile := filepath.Join(t.TempDir(), "bothy-image.tar")
	var stdout, stderr bytes.Buffer
	err := run([]string{"-binary", bin, "-version", "v1.2.3", "-revision", "abc123", "-out", out, "-tar", tarFile,
		"-repository", "registry.example.com/team/bothy"}, "1796300710", &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	const ref = "registry.example.com/team/bothy:v1.2.3"
	if want := out + " linux/" + runtime.GOARCH + " " + ref + "@sha256:"; !strings.HasPrefix(stdout.String(), want) {
		t.Errorf("output %q, want it to begin with %q", stdout.String(), want)
	}
	img := imageInLayout(t, out, ref)
	wantImageConfig(t, img)
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), digest.String()) {
		t.Errorf("output %q does not name the digest %s", stdout.String(), digest)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tarball.ImageFromPath(tarFile, &tag); err != nil {
		t.Errorf("the tarball holds no image %s: %v", ref, err)
	}
}

// imageInLayout reads the OCI layout at out, checks that its index holds
// one image and that it is named ref, and returns that image.
func imageInLayout(t *testing.T, out, ref string) v1.Image {
	t.Helper()
	ii, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("index %+v, want one image named %s", im.Manifests, ref)
	}
	img, err := ii.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// wantImageConfig checks the config TestRun asked for: the platform of the
// binary, the time of SOURCE_DATE_EPOCH and the revision label.
func wantImageConfig(t *testing.T, img v1.Image) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Architecture != runtime.GOARCH || cf.OS != "linux" || cf.Created.Unix() != 1796300710 ||
		cf.Config.Labels["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("config: %s/%s created %v labels %v", cf.OS, cf.Architecture, cf.Created, cf.Config.Labels)
	}
}

// TestRunRefuses: a bad command line is a usage error; a binary that is
// no static Linux Go build fails.
func TestRunRefuses(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "bothy")
	if err := os.WriteFile(fake, []byte("not a Go binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image")
	good := []string{"-binary", fake, "-version", "v1", "-revision", "r", "-out", out}
	var usage usageError
	for name, c := range map[string]struct {
		args  []string
		epoch string
	}{
		"no epoch":      {good, ""},
		"bad epoch":     {good, "yesterday"},
		"no version":    {[]string{"-binary", fake, "-revision", "r", "-out", out}, "1"},
		"extra arg":     {append(append([]string{}, good...), "push"), "1"},
		"unknown flag":  {append([]string{"-push"}, good...), "1"},
		"missing value": {[]string{"-binary"}, "1"},
	} {
		err := run(c.args, c.epoch, &bytes.Buffer{}, &bytes.Buffer{})
		if !errors.As(err, &usage) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	err := run(good, "1796300710", &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || errors.As(err, &usage) || !strings.Contains(err.Error(), fake) {
		t.Errorf("a file that is no Go binary: %v, want a failure naming it", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed run wrote %s (%v)", out, err)
	}
	if err := run([]string{"-help"}, "", &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-help: %v", err)
	}
}
