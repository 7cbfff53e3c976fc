// Package version reports what binary is running: the module version and the
// version-control revision that the Go toolchain stamps into every build, or
// the version that `make dist` sets with -ldflags.
package version

import (
	"runtime"
	"runtime/debug"
)

// Stamp and StampRevision are set by `make dist` (-ldflags "-X
// .../version.Stamp=v1.2.3 -X .../version.StampRevision=<commit>"): a build
// from a work tree has the module version "(devel)", and the toolchain
// stamps no revision where it cannot read the repository (a git worktree,
// -buildvcs=false).
var (
	Stamp         string
	StampRevision string
)

// Info describes the running binary.
type Info struct {
	// Version is Stamp when set, else the main module's version from the
	// build info ("(devel)" for a build from a work tree).
	Version string `json:"version"`
	// Revision is the VCS revision the binary was built from, "unknown"
	// when the build carries none (go run, go test).
	Revision string `json:"revision"`
	// Time is the commit time of Revision (RFC 3339), empty when unknown.
	Time string `json:"time,omitempty"`
	// Modified reports whether the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Get reads the build info of the running binary.
func Get() Info {
	in := Info{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			in.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.time":
				in.Time = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if Stamp != "" {
		in.Version = Stamp
	}
	if StampRevision != "" && in.Revision == "unknown" {
		in.Revision = StampRevision
	}
	return in
}

// String renders the info on one line for `bothy version`.
func (in Info) String() string {
	s := "bothy " + in.Version + " (revision " + in.Revision
	if in.Modified {
		s += ", modified"
	}
	if in.Time != "" {
		s += ", " + in.Time
	}
	return s + ", " + in.GoVersion + ")"
}
