package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"bothy.example.com/bothy/internal/platform/config"
)

// testCreated is the creation time of the test images (a commit time).
var testCreated = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// fixture writes a stand-in binary and CA bundle (Build copies bytes; it
// does not run them, so a real bothy build would only cost time) and
// returns the options of an image of them.
func fixture(t *testing.T) (Options, []byte) {
	t.Helper()
	dir := t.TempDir()
	bin := []byte("\x7fELF stand-in for the bothy binary\n" + strings.Repeat("x", 4096))
	if err := os.WriteFile(filepath.Join(dir, "bothy"), bin, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{
		Binary:         filepath.Join(dir, "bothy"),
		Platform:       v1.Platform{OS: "linux", Architecture: "amd64"},
		Version:        "v1.2.3",
		Revision:       "0123456789abcdef0123456789abcdef01234567",
		Created:        testCreated,
		CACertificates: filepath.Join(dir, "ca.crt"),
	}, bin
}

// entry is one file of the layer as read back.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// layerFiles reads the single layer of img into its files by path.
func layerFiles(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = entry{hdr: h, data: data}
	}
	return files
}

// TestImageLayout builds an image into an OCI layout, loads it back as a
// registry tool would and checks what a container runtime reads: the
// index, the configuration and every file of the layer.
func TestImageLayout(t *testing.T) {
	opts, bin := fixture(t)
	img, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "image")
	const ref = DefaultRepository + ":v1.2.3"
	if err := WriteLayout(dir, img, ref); err != nil {
		t.Fatal(err)
	}
	// Writing again replaces the index: the layout names one image.
	if err := WriteLayout(dir, img, ref); err != nil {
		t.Fatal(err)
	}

	loaded := loadLayout(t, dir, ref)
	checkManifest(t, loaded)
	cf, err := loaded.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checkRunConfig(t, cf)
	checkEnvironment(t, cf.Config)
	checkLabels(t, cf.Config)
	if len(cf.History) != 1 || !cf.History[0].Created.Equal(testCreated) {
		t.Errorf("history %+v, want one entry created %v", cf.History, testCreated)
	}

	files := layerFiles(t, loaded)
	checkFileModes(t, files)
	checkFileContents(t, files, bin)
}

// loadLayout reads the OCI layout in dir, checks that its index names one
// image, ref, for linux/amd64 with an OCI manifest, and returns that image.
func loadLayout(t *testing.T, dir, ref string) v1.Image {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if desc.MediaType != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %q, want %q", desc.MediaType, types.OCIManifestSchema1)
	}
	for _, a := range []string{"org.opencontainers.image.ref.name", "io.containerd.image.name"} {
		if got := desc.Annotations[a]; got != ref {
			t.Errorf("annotation %s %q, want %q", a, got, ref)
		}
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != "amd64" {
		t.Errorf("index platform %v, want linux/amd64", desc.Platform)
	}
	loaded, err := ii.Image(desc.Digest)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

// checkManifest checks that img's manifest has OCI media types and one
// layer.
func checkManifest(t *testing.T, img v1.Image) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type %q, want %q", m.Config.MediaType, types.OCIConfigJSON)
	}
	if len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("layers %+v, want one of media type %q", m.Layers, types.OCILayer)
	}
}

// checkRunConfig checks the platform, creation time and run configuration
// of cf: bothy serve as 65532:65532 in /, with no volume and the image's
// environment.
func checkRunConfig(t *testing.T, cf *v1.ConfigFile) {
	t.Helper()
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	if !cf.Created.Equal(testCreated) {
		t.Errorf("created %v, want %v", cf.Created.Time, testCreated)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/bothy"}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("cmd %q, want [serve]", c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if c.WorkingDir != "/" {
		t.Errorf("working dir %q, want /", c.WorkingDir)
	}
	if len(c.Volumes) != 0 {
		t.Errorf("volumes %v: the image must need no writable path", c.Volumes)
	}
	wantEnv := []string{"PATH=/usr/local/bin", "BOTHY_SERVER_ADDR=0.0.0.0:8080", "BOTHY_METRICS_ADDR=0.0.0.0:9090"}
	if !slices.Equal(c.Env, wantEnv) {
		t.Errorf("env %q, want %q", c.Env, wantEnv)
	}
}

// checkEnvironment checks that every BOTHY_ variable of c is a
// configuration key, which the server reads and checks: its values are
// valid, and its addresses listen on every interface at the exposed ports.
func checkEnvironment(t *testing.T, c v1.Config) {
	t.Helper()
	known := map[string]bool{}
	for _, k := range config.Registry() {
		known[config.EnvName(k.Name)] = true
	}
	for _, kv := range c.Env {
		if n, _, _ := strings.Cut(kv, "="); strings.HasPrefix(n, "BOTHY_") && !known[n] {
			t.Errorf("env %s is no configuration key", n)
		}
	}
	cfg, err := config.Load("", c.Env)
	if err != nil {
		t.Fatalf("the image's environment does not load: %v", err)
	}
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []string{"8080/tcp", "9090/tcp"}) {
		t.Errorf("exposed ports %q, want 8080/tcp and 9090/tcp", ports)
	}
	for _, addr := range []string{cfg.String(config.ServerAddr), cfg.String(config.MetricsAddr)} {
		host, port, _ := strings.Cut(addr, ":")
		if host != "0.0.0.0" {
			t.Errorf("address %q listens on %q, not every interface of the container", addr, host)
		}
		if _, ok := c.ExposedPorts[port+"/tcp"]; !ok {
			t.Errorf("address %q: port not exposed", addr)
		}
	}
}

// checkLabels checks that c has exactly the OCI annotation labels of the
// fixture's image (no licenses label: the fixture gives none).
func checkLabels(t *testing.T, c v1.Config) {
	t.Helper()
	wantLabels := map[string]string{
		"org.opencontainers.image.title":         "bothy",
		"org.opencontainers.image.description":   "Bothy, a team chat server in which AI agents are members like people",
		"org.opencontainers.image.version":       "v1.2.3",
		"org.opencontainers.image.revision":      "0123456789abcdef0123456789abcdef01234567",
		"org.opencontainers.image.created":       "2026-11-30T12:00:00Z",
		"org.opencontainers.image.source":        "https://bothy.example.com/bothy",
		"org.opencontainers.image.documentation": "https://bothy.example.com/bothy",
	}
	for k, v := range wantLabels {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if len(c.Labels) != len(wantLabels) {
		t.Errorf("labels %v, want exactly %v (no licenses label unless one is given)", c.Labels, wantLabels)
	}
}

// checkFileModes checks that the layer holds exactly the image's paths,
// folders and regular files owned and writable by root alone, at the
// creation time.
func checkFileModes(t *testing.T, files map[string]entry) {
	t.Helper()
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	wantPaths := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt",
		"usr/", "usr/local/", "usr/local/bin/", "usr/local/bin/bothy"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("layer holds %q, want %q", paths, wantPaths)
	}
	for p, e := range files {
		h := e.hdr
		// Owned by root and writable by root alone: the user 65532 can
		// write nowhere, and nothing needs it to.
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "root" || h.Gname != "root" {
			t.Errorf("%s owned by %d:%d (%s:%s), want root", p, h.Uid, h.Gid, h.Uname, h.Gname)
		}
		if h.Mode&0o022 != 0 || h.Mode&^0o777 != 0 {
			t.Errorf("%s mode %o: writable by others than root, or setuid/setgid/sticky", p, h.Mode)
		}
		if !h.ModTime.Equal(testCreated) {
			t.Errorf("%s time %v, want %v", p, h.ModTime, testCreated)
		}
		if strings.HasSuffix(p, "/") != (h.Typeflag == tar.TypeDir) || h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg {
			t.Errorf("%s type %q: want folders and regular files only", p, h.Typeflag)
		}
	}
}

// checkFileContents checks the layer's binary (bin's bytes), CA bundle,
// user and group files.
func checkFileContents(t *testing.T, files map[string]entry, bin []byte) {
	t.Helper()
	b := files["usr/local/bin/bothy"]
	if b.hdr == nil || b.hdr.Mode != 0o755 || !bytes.Equal(b.data, bin) {
		t.Errorf("usr/local/bin/bothy: want the binary's bytes with mode 0755, got mode %o, %d bytes", b.hdr.Mode, len(b.data))
	}
	if ca := files["etc/ssl/certs/ca-certificates.crt"]; !strings.Contains(string(ca.data), "stand-in") || ca.hdr.Mode != 0o644 {
		t.Errorf("CA bundle not copied as 0644: %q", ca.data)
	}
	// The user of the configuration is the user bothy of /etc/passwd, in
	// the group bothy of /etc/group, and no root account can log in.
	if !strings.Contains(string(files["etc/passwd"].data), "\nbothy:x:65532:65532:bothy:/nonexistent:/sbin/nologin\n") {
		t.Errorf("/etc/passwd has no user bothy 65532:65532:\n%s", files["etc/passwd"].data)
	}
	if !strings.Contains(string(files["etc/group"].data), "\nbothy:x:65532:\n") {
		t.Errorf("/etc/group has no group bothy 65532:\n%s", files["etc/group"].data)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(files["etc/passwd"].data)), "\n") {
		if !strings.HasSuffix(line, ":/sbin/nologin") {
			t.Errorf("/etc/passwd line %q has a login shell", line)
		}
	}
}

// TestImageReproducible: the same inputs give the same digest, and the
// creation time, the revision and the CA bundle each change it (they are
// in the image, not ignored).
func TestImageReproducible(t *testing.T) {
	opts, _ := fixture(t)
	digest := func(o Options) v1.Hash {
		t.Helper()
		img, err := Build(o)
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	first := digest(opts)
	if again := digest(opts); again != first {
		t.Errorf("two builds of the same inputs: %s and %s", first, again)
	}
	later := opts
	later.Created = testCreated.Add(time.Hour)
	other := opts
	other.Revision = "fedcba9876543210fedcba9876543210fedcba98"
	noCA := opts
	noCA.CACertificates = ""
	for name, o := range map[string]Options{"created": later, "revision": other, "no CA": noCA} {
		if digest(o) == first {
			t.Errorf("%s: same digest as the first build", name)
		}
	}

	img, err := Build(noCA)
	if err != nil {
		t.Fatal(err)
	}
	for p := range layerFiles(t, img) {
		if strings.HasPrefix(p, "etc/ssl") {
			t.Errorf("image without CA bundle holds %s", p)
		}
	}
	opts.Licenses = "Apache-2.0"
	img, err = Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels["org.opencontainers.image.licenses"]; got != "Apache-2.0" {
		t.Errorf("licenses label %q, want Apache-2.0", got)
	}
}

// TestDockerArchive: the tarball for docker load holds the same
// configuration and layer under the tag.
func TestDockerArchive(t *testing.T) {
	opts, _ := fixture(t)
	img, err := Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "bothy.tar")
	const ref = DefaultRepository + ":v1.2.3"
	if err := WriteDockerArchive(file, img, ref); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(file, &tag)
	if err != nil {
		t.Fatal(err)
	}
	built, errA := img.ConfigName()
	read, errB := loaded.ConfigName()
	if errA != nil || errB != nil || built != read {
		t.Errorf("config: built %s, loaded %s (%v, %v)", built, read, errA, errB)
	}
	if files := layerFiles(t, loaded); files["usr/local/bin/bothy"].hdr == nil {
		t.Error("the tarball's layer has no usr/local/bin/bothy")
	}
	if err := WriteDockerArchive(filepath.Join(t.TempDir(), "x.tar"), img, DefaultRepository); err == nil {
		t.Error("a name without a tag was accepted")
	}
}

// TestBuildRefusesIncompleteOptions: each required option is required.
func TestBuildRefusesIncompleteOptions(t *testing.T) {
	opts, _ := fixture(t)
	for name, change := range map[string]func(*Options){
		"binary":   func(o *Options) { o.Binary = "" },
		"missing":  func(o *Options) { o.Binary = filepath.Join(t.TempDir(), "nothing") },
		"platform": func(o *Options) { o.Platform = v1.Platform{} },
		"version":  func(o *Options) { o.Version = "" },
		"revision": func(o *Options) { o.Revision = "" },
		"created":  func(o *Options) { o.Created = time.Time{} },
		"CA":       func(o *Options) { o.CACertificates = filepath.Join(t.TempDir(), "nothing") },
	} {
		o := opts
		change(&o)
		if _, err := Build(o); err == nil {
			t.Errorf("%s: Build accepted %+v", name, o)
		}
	}
}

// TestInspect: only a static Linux Go binary passes, and its platform is
// read from its build settings.
func TestInspect(t *testing.T) {
	set := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	p, err := platformOf("b", set("CGO_ENABLED", "0", "GOARCH", "arm64", "GOOS", "linux"))
	if err != nil || p.String() != "linux/arm64" {
		t.Errorf("static linux/arm64: %v, %v", p, err)
	}
	p, err = platformOf("b", set("CGO_ENABLED", "0", "GOARCH", "arm", "GOOS", "linux", "GOARM", "7,softfloat"))
	if err != nil || p.String() != "linux/arm/v7" {
		t.Errorf("static linux/arm GOARM 7: %v, %v", p, err)
	}
	for name, s := range map[string][]debug.BuildSetting{
		"cgo":        set("CGO_ENABLED", "1", "GOARCH", "amd64", "GOOS", "linux"),
		"cgo unset":  set("GOARCH", "amd64", "GOOS", "linux"),
		"darwin":     set("CGO_ENABLED", "0", "GOARCH", "arm64", "GOOS", "darwin"),
		"no GOARCH":  set("CGO_ENABLED", "0", "GOOS", "linux"),
		"no setting": nil,
	} {
		if _, err := platformOf("b", s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	opts, _ := fixture(t)
	if _, err := Inspect(opts.Binary); err == nil {
		t.Error("a file that is no Go binary was accepted")
	}
	wantInspectOfTestBinary(t)
}

// wantInspectOfTestBinary runs Inspect on the test binary, a real Go
// binary: Inspect reads its settings and names its platform when it is
// static and for linux, and refuses it otherwise.
func wantInspectOfTestBinary(t *testing.T) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	static := false
	for _, kv := range bi.Settings {
		static = static || kv.Key == "CGO_ENABLED" && kv.Value == "0"
	}
	p, err := Inspect(exe)
	switch {
	case static && runtime.GOOS == "linux":
		if err != nil || p.OS != runtime.GOOS || p.Architecture != runtime.GOARCH {
			t.Errorf("Inspect(static test binary) = %v, %v; want %s/%s", p, err, runtime.GOOS, runtime.GOARCH)
		}
	case err == nil:
		t.Errorf("Inspect(test binary built with cgo or not for linux) = %v, want an error", p)
	}
}
