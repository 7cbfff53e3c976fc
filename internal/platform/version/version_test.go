package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestStampOverridesBuildInfo(t *testing.T) {
	Stamp, StampRevision = "v1.2.3", "abc123"
	defer func() { Stamp, StampRevision = "", "" }()
	in := Get()
	if in.Version != "v1.2.3" || in.GoVersion != runtime.Version() {
		t.Fatalf("info %+v", in)
	}
	// A test binary carries no VCS revision, so the stamp fills it.
	if in.Revision != "abc123" {
		t.Fatalf("revision %q, want the stamp", in.Revision)
	}
	if s := in.String(); !strings.HasPrefix(s, "bothy v1.2.3 (revision abc123") {
		t.Fatalf("line %q", s)
	}
}
