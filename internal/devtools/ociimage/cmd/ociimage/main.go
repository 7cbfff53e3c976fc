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
	f, err := parseFlags(args, epoch, stderr)
	if err != nil {
		return err
	}
	platform, err := ociimage.Inspect(f.binary)
	if err != nil {
		return err
	}
	img, err := ociimage.Build(ociimage.Options{
		Binary:         f.binary,
		Platform:       platform,
		Version:        f.version,
		Revision:       f.revision,
		Created:        f.created,
		CACertificates: f.ca,
		Source:         f.source,
		Licenses:       f.licenses,
	})
	if err != nil {
		return err
	}
	ref := f.repository + ":" + f.version
	if err := ociimage.WriteLayout(f.out, img, ref); err != nil {
		return err
	}
	if f.tarFile != "" {
		if err := ociimage.WriteDockerArchive(f.tarFile, img, ref); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("ociimage: %w", err)
	}
	fmt.Fprintf(stdout, "%s %s %s@%s\n", f.out, platform, ref, digest)
	return nil
}

// flags are the command line's values and the creation time read from
// SOURCE_DATE_EPOCH.
type flags struct {
	binary, version, revision, out, tarFile string
	repository, ca, source, licenses        string
	created                                 time.Time
}

// parseFlags parses args and epoch (SOURCE_DATE_EPOCH), writing usage to
// stderr. A mistake is a usageError; -help returns flag.ErrHelp.
func parseFlags(args []string, epoch string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.binary, "binary", "", "static Linux bothy binary (make dist with GOOS=linux)")
	fs.StringVar(&f.version, "version", "", "version of the binary (make dist's VERSION); the image's tag")
	fs.StringVar(&f.revision, "revision", "", "VCS revision of the binary (make dist's REVISION)")
	fs.StringVar(&f.out, "out", "", "folder of the OCI image layout to write")
	fs.StringVar(&f.tarFile, "tar", "", "also write a docker-archive tarball for docker load to this file")
	fs.StringVar(&f.repository, "repository", ociimage.DefaultRepository, "repository of the image's name REPOSITORY:VERSION")
	fs.StringVar(&f.ca, "ca-certificates", "", "PEM CA bundle to install at "+ociimage.CACertificatesPath+" (empty: none)")
	fs.StringVar(&f.source, "source", ociimage.DefaultSource, "org.opencontainers.image.source label")
	fs.StringVar(&f.licenses, "licenses", "", "org.opencontainers.image.licenses label, an SPDX expression (empty: no label)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, usageError{err.Error()}
	}
	switch {
	case fs.NArg() > 0:
		return f, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case f.binary == "" || f.version == "" || f.revision == "" || f.out == "":
		return f, usageError{"-binary, -version, -revision and -out are required"}
	}
	secs, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || secs <= 0 {
		return f, usageError{fmt.Sprintf("SOURCE_DATE_EPOCH must be the creation time in Unix seconds (make image sets the commit time), not %q", epoch)}
	}
	f.created = time.Unix(secs, 0)
	return f, nil
}
