package gobuild_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/gobuild"
)

// TestTarget: each test folder and package has a file of its own under
// bin/testbins/built, named after the package's last element.
func TestTarget(t *testing.T) {
	t.Parallel()
	for pkg, want := range map[string]string{
		"./testdata/hello":                  "bin/testbins/built/internal/devtools/gobuild/testdata_hello/hello",
		"bothy.example.com/bothy/cmd/bothy": "bin/testbins/built/internal/devtools/gobuild/bothy_example_com_bothy_cmd_bothy/bothy",
	} {
		got, err := gobuild.Target(pkg)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(filepath.ToSlash(got), "/"+want) {
			t.Errorf("Target(%s) = %s, want …/%s", pkg, got, want)
		}
	}
}

// TestBinaryKeptWhenCurrent: the binary runs, and a second build of
// unchanged code links nothing (-x shows what the go command runs).
func TestBinaryKeptWhenCurrent(t *testing.T) {
	t.Parallel()
	bin := gobuild.Binary(t, "./testdata/hello")
	if out, err := exec.Command(bin).Output(); err != nil || string(out) != "Hello, Sam\n" {
		t.Fatalf("hello: %q, %v", out, err)
	}
	cmd := gobuild.Command(t.Context(), bin, "./testdata/hello")
	cmd.Args = append(cmd.Args[:2:2], append([]string{"-x"}, cmd.Args[2:]...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build again: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("WORK=")) || bytes.Contains(out, []byte("/link -o")) {
		t.Fatalf("linked again, or -x said nothing:\n%s", out)
	}
}
