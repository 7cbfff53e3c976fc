// Command ociimage builds the container image of Bothy from a static Linux
// binary, without a Docker daemon (package ociimage), and writes it as an
// OCI image layout and optionally as a tarball for `docker load`.
//
// Usage (the Makefile's image target runs it):
//
//	SOURCE_DATE_EPOCH=UNIX_SECONDS go run ./internal/devtools/ociimage/cmd/ociimage \
//	    -binary FILE -version V -revision R -out DIR [-tar FILE]
//	    [-repository REPO] [-ca-certificates FILE] [-source URL] [-licenses SPDX]
//
// SOURCE_DATE_EPOCH (https://reproducible-builds.org/specs/source-date-epoch/)
// is the image's creation time and the time of its files; it is required,
// so that the same inputs always give the same digest. The image is named
// REPO:V in the layout's index and in the tarball. It prints the name and
// the manifest digest on success, exits 1 when the image cannot be built or
// written and 2 on bad flags.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"bothy.example.com/bothy/internal/devtools/ociimage"
)

func main() {
	err := run(os.Args[1:], os.Getenv("SOURCE_DATE_EPOCH"), os.Stdout, os.Stderr)
	var usage usageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run parses args, builds the image and writes it; epoch is the value of
// SOURCE_DATE_EPOCH.
func run(args []string, epoch string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	binary := fs.String("binary", "", "static Linux bothy binary (make dist with GOOS=linux)")
	version := fs.String("version", "", "version of the binary (make dist's VERSION); the image's tag")
	revision := fs.String("revision", "", "VCS revision of the binary (make dist's REVISION)")
	out := fs.String("out", "", "folder of the OCI image layout to write")
	tarFile := fs.String("tar", "", "also write a docker-archive tarball for docker load to this file")
	repository := fs.String("repository", ociimage.DefaultRepository, "repository of the image's name REPOSITORY:VERSION")
	ca := fs.String("ca-certificates", "", "PEM CA bundle to install at "+ociimage.CACertificatesPath+" (empty: none)")
	source := fs.String("source", ociimage.DefaultSource, "org.opencontainers.image.source label")
	licenses := fs.String("licenses", "", "org.opencontainers.image.licenses label, an SPDX expression (empty: no label)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case *binary == "" || *version == "" || *revision == "" || *out == "":
		return usageError{"-binary, -version, -revision and -out are required"}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || secs <= 0 {
		return usageError{fmt.Sprintf("SOURCE_DATE_EPOCH must be the creation time in Unix seconds (make image sets the commit time), not %q", epoch)}
	}
	platform, err := ociimage.Inspect(*binary)
	if err != nil {
		return err
	}
	img, err := ociimage.Build(ociimage.Options{
		Binary:         *binary,
		Platform:       platform,
		Version:        *version,
		Revision:       *revision,
		Created:        time.Unix(secs, 0),
		CACertificates: *ca,
		Source:         *source,
		Licenses:       *licenses,
	})
	if err != nil {
		return err
	}
	ref := *repository + ":" + *version
	if err := ociimage.WriteLayout(*out, img, ref); err != nil {
		return err
	}
	if *tarFile != "" {
		if err := ociimage.WriteDockerArchive(*tarFile, img, ref); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	fmt.Fprintf(stdout, "%s %s %s@%s\n", *out, platform, ref, digest)
	return nil
}
