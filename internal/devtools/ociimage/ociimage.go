// Package ociimage builds the container image of Bothy without a Docker
// daemon: one layer holding the static binary at /usr/local/bin/bothy and
// the few files a static Go program needs to behave in a container (a
// passwd and group entry for the non-root user bothy, 65532:65532, and
// optionally a CA bundle), on no base image. It writes the image as an OCI
// image layout (a folder that crane, skopeo, oras, containerd and podman
// read) and, for `docker load`, as a docker-archive tarball.
//
// The image needs no writable path: bothy serve and bothy migrate write
// nothing but their logs to stderr, so it runs with a read-only root
// filesystem (deploy/kubernetes/30-deployment.yaml sets
// readOnlyRootFilesystem: true).
// Every file belongs to root and is writable by root alone; the user
// bothy owns nothing. Two builds from the same binary, CA bundle, version,
// revision and creation time give the same digest: every time in the
// image is Options.Created, never the clock.
//
// `make image` runs it through cmd/ociimage; deploy/kubernetes/README.md
// says how to push the image and run it.
package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where the image puts things and whom it runs as. The Kubernetes
// manifests (deploy/kubernetes) and their test use the same values.
const (
	// BinaryPath is the binary's path in the image, the entrypoint.
	BinaryPath = "/usr/local/bin/bothy"
	// CACertificatesPath is where the CA bundle goes: the first file Go's
	// crypto/x509 reads on Linux, so TLS to PostgreSQL (sslmode=verify-full
	// without sslrootcert) and to model servers finds the roots.
	CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"
	// UID and GID are the user and group bothy the image runs as: 65532 is
	// the "nonroot" id of distroless images, which cluster policies and
	// operators already recognise, and no distribution gives it to a user.
	UID = 65532
	GID = 65532
	// User is the image's User, numeric so that Kubernetes' runAsNonRoot
	// can check it without reading /etc/passwd.
	User = "65532:65532"
	// APIPort and MetricsPort are the ports of the image's
	// BOTHY_SERVER_ADDR and BOTHY_METRICS_ADDR.
	APIPort     = 8080
	MetricsPort = 9090
	// DefaultRepository is the repository `make image` tags the image with
	// (IMAGE_REPOSITORY overrides it) and the Kubernetes manifests name.
	DefaultRepository = "registry.example.com/bothy"
	// DefaultSource is the org.opencontainers.image.source label when
	// Options.Source is empty: the module's home.
	DefaultSource = "https://bothy.example.com/bothy"
)

// Env is the environment of the image besides PATH: in a container the
// server must listen on every interface, not on the loopback of the
// defaults (docs/configuration.md, server.addr and metrics.addr), and
// /metrics goes to a port of its own that a Service need not publish.
var env = []string{
	fmt.Sprintf("BOTHY_SERVER_ADDR=0.0.0.0:%d", APIPort),
	fmt.Sprintf("BOTHY_METRICS_ADDR=0.0.0.0:%d", MetricsPort),
}

// Options describe the image to build.
type Options struct {
	// Binary is the path of a static Linux bothy binary (make dist with
	// GOOS=linux); Inspect checks one and reads its platform.
	Binary string
	// Platform is the binary's OS and architecture (Inspect returns it).
	Platform v1.Platform
	// Version and Revision are the stamps of make dist (git describe and
	// the commit); they become the labels org.opencontainers.image.version
	// and .revision. Both are required.
	Version, Revision string
	// Created is the time the image says it was made, and the time of
	// every file in the layer: the commit time or SOURCE_DATE_EPOCH, so
	// that a rebuild gives the same digest. Required.
	Created time.Time
	// CACertificates is the path of a PEM bundle to install at
	// CACertificatesPath; empty installs none.
	CACertificates string
	// Source is the org.opencontainers.image.source label, DefaultSource
	// when empty.
	Source string
	// Licenses is the org.opencontainers.image.licenses label (an SPDX
	// expression); empty leaves the label out rather than guess one.
	Licenses string
}

// file is one regular file or folder of the layer.
type file struct {
	name string // path in the image, without the leading slash
	mode int64  // permission bits
	dir  bool
	data []byte
}

// passwd and group name root (some tools expect it) and the user bothy,
// whose home does not exist: nothing of the image is meant to be written.
const (
	passwd = "root:x:0:0:root:/root:/sbin/nologin\nbothy:x:65532:65532:bothy:/nonexistent:/sbin/nologin\n"
	group  = "root:x:0:\nbothy:x:65532:\n"
)

// Build returns the image of o: one layer, the configuration (entrypoint,
// command serve, user, environment, ports, labels) and OCI media types. It
// fails when a required option is missing or a file cannot be read.
func Build(o Options) (v1.Image, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	created := o.Created.UTC().Truncate(time.Second)
	layer, err := layerOf(o, created)
	if err != nil {
		return nil, err
	}
	what := "bothy " + o.Version + " at " + BinaryPath + ", user bothy 65532:65532 in /etc/passwd and /etc/group"
	if o.CACertificates != "" {
		what += ", CA certificates at " + CACertificatesPath
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: created}, CreatedBy: "ociimage (make image)", Comment: what},
	})
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	img, err = mutate.ConfigFile(img, configOf(o, created, cf.DeepCopy()))
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	return img, nil
}

// check refuses options that lack what every image needs.
func (o Options) check() error {
	switch {
	case o.Binary == "":
		return errors.New("ociimage: no binary")
	case o.Platform.OS == "" || o.Platform.Architecture == "":
		return errors.New("ociimage: no platform (Inspect reads it from the binary)")
	case o.Version == "" || o.Revision == "":
		return errors.New("ociimage: version and revision are required")
	case o.Created.IsZero():
		return errors.New("ociimage: no creation time (the commit time or SOURCE_DATE_EPOCH)")
	}
	return nil
}

// layerOf returns the image's one layer: the user files, the CA
// certificates when o names them, and the binary.
func layerOf(o Options, created time.Time) (v1.Layer, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	files := []file{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
	}
	if o.CACertificates != "" {
		ca, err := os.ReadFile(o.CACertificates)
		if err != nil {
			return nil, fmt.Errorf("ociimage: CA certificates: %w", err)
		}
		files = append(files,
			file{name: "etc/ssl", dir: true, mode: 0o755},
			file{name: "etc/ssl/certs", dir: true, mode: 0o755},
			file{name: strings.TrimPrefix(CACertificatesPath, "/"), mode: 0o644, data: ca})
	}
	files = append(files,
		file{name: "usr", dir: true, mode: 0o755},
		file{name: "usr/local", dir: true, mode: 0o755},
		file{name: "usr/local/bin", dir: true, mode: 0o755},
		file{name: strings.TrimPrefix(BinaryPath, "/"), mode: 0o755, data: bin})
	layerTar, err := tarOf(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	return layer, nil
}

// labelsOf returns the image's OCI annotations as configuration labels.
func labelsOf(o Options, created time.Time) map[string]string {
	source := o.Source
	if source == "" {
		source = DefaultSource
	}
	labels := map[string]string{
		"org.opencontainers.image.title":         "bothy",
		"org.opencontainers.image.description":   "Bothy, a team chat server in which AI agents are members like people",
		"org.opencontainers.image.version":       o.Version,
		"org.opencontainers.image.revision":      o.Revision,
		"org.opencontainers.image.created":       created.Format(time.RFC3339),
		"org.opencontainers.image.source":        source,
		"org.opencontainers.image.documentation": source,
	}
	if o.Licenses != "" {
		labels["org.opencontainers.image.licenses"] = o.Licenses
	}
	return labels
}

// configOf fills cf, a copy of the image's configuration, with o's
// platform and the run configuration of bothy serve.
func configOf(o Options, created time.Time, cf *v1.ConfigFile) *v1.ConfigFile {
	cf.OS = o.Platform.OS
	cf.Architecture = o.Platform.Architecture
	cf.Variant = o.Platform.Variant
	cf.Created = v1.Time{Time: created}
	cf.Author = ""
	cf.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{"serve"},
		User:       User,
		WorkingDir: "/",
		// PATH lets a pod's command say "bothy"; nothing else is on it.
		Env: append([]string{"PATH=" + path.Dir(BinaryPath)}, env...),
		ExposedPorts: map[string]struct{}{
			fmt.Sprintf("%d/tcp", APIPort):     {},
			fmt.Sprintf("%d/tcp", MetricsPort): {},
		},
		Labels: labelsOf(o, created),
		// SIGTERM drains (docs/operations.md, "Signals and stopping").
		StopSignal: "SIGTERM",
	}
	return cf
}

// tarOf returns the uncompressed tar of files, each owned by root with
// the time created, so that the bytes depend on the contents alone.
func tarOf(files []file, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     0,
			Gid:     0,
			Uname:   "root",
			Gname:   "root",
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ociimage: layer %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("ociimage: layer %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	return buf.Bytes(), nil
}

// Inspect reads the Go build information of the binary at path and
// returns its platform. It fails when the file is no Go binary, is not
// built for Linux, or was built with cgo: a binary that needs the C
// library cannot start on an image without one.
func Inspect(path string) (v1.Platform, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return v1.Platform{}, fmt.Errorf("ociimage: %s: %w", path, err)
	}
	return platformOf(path, bi.Settings)
}

// platformOf checks the build settings of the binary named by path and
// returns its platform (see Inspect).
func platformOf(path string, settings []debug.BuildSetting) (v1.Platform, error) {
	s := map[string]string{}
	for _, kv := range settings {
		s[kv.Key] = kv.Value
	}
	p := v1.Platform{OS: s["GOOS"], Architecture: s["GOARCH"]}
	switch {
	case p.OS != "linux":
		return v1.Platform{}, fmt.Errorf("ociimage: %s is built for GOOS %q, not linux (make image builds with GOOS=linux)", path, p.OS)
	case p.Architecture == "":
		return v1.Platform{}, fmt.Errorf("ociimage: %s names no GOARCH", path)
	case s["CGO_ENABLED"] != "0":
		return v1.Platform{}, fmt.Errorf("ociimage: %s is not static (CGO_ENABLED=%q; build it as make dist does, with CGO_ENABLED=0)", path, s["CGO_ENABLED"])
	}
	if p.Architecture == "arm" && s["GOARM"] != "" {
		// GOARM is "7" or "7,softfloat"; the OCI variant is "v7".
		v, _, _ := strings.Cut(s["GOARM"], ",")
		p.Variant = "v" + v
	}
	return p, nil
}

// WriteLayout writes img into dir as an OCI image layout whose index
// names it ref, a full name such as registry.example.com/bothy:v1.2.3, in
// the annotations org.opencontainers.image.ref.name (skopeo's oci:DIR:REF
// selects by it) and io.containerd.image.name (the name containerd's and
// docker's import give the image). An index.json already in
// dir is replaced, so the layout holds this image alone; dir is created if
// missing. It fails when a file cannot be written.
func WriteLayout(dir string, img v1.Image, ref string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	err = p.AppendImage(img,
		layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref, "io.containerd.image.name": ref}),
		layout.WithPlatform(v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}))
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	return nil
}

// WriteDockerArchive writes img to file as a tarball that `docker load`
// (and `kind load image-archive`) reads, tagged tag (for example
// registry.example.com/bothy:v1.2.3). It fails on an invalid tag or when
// the file cannot be written.
func WriteDockerArchive(file string, img v1.Image, tag string) error {
	t, err := name.NewTag(tag, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("ociimage: tag: %w", err)
	}
	if err := tarball.WriteToFile(file, t, img); err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	return nil
}

// Env returns a copy of env: an importer cannot change it
// (house rule: no exported mutable package variable).
func Env() []string { return slices.Clone(env) }
