package apicompat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"
)

// GoAPI is the exported API of a Go module's library packages: each
// package's type information by import path. Commands (package main) have
// no API a program can import, so they are not part of it.
type GoAPI map[string]*types.Package

// LoadGoAPI type-checks the packages matching patterns (go list patterns
// such as "./...") in the module at dir, as the go command builds them.
// Only the packages themselves are type-checked from source; their
// dependencies come from the build cache's export data.
func LoadGoAPI(dir string, patterns ...string) (GoAPI, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: dir, Env: append(os.Environ(), "GOFLAGS=")}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	api := GoAPI{}
	var errs []error
	for _, p := range pkgs {
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %w", p.PkgPath, e))
		}
		if p.Name != "main" && p.Types != nil {
			api[p.PkgPath] = p.Types
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(api) == 0 {
		return nil, fmt.Errorf("no library package matches %v in %s", patterns, dir)
	}
	return api, nil
}

// snapshotExt names the files of a snapshot: one per package, its import
// path on the first line, then the package's export data.
const snapshotExt = ".export"

// Write stores the API as a snapshot in folder dir (created if missing),
// one file per package. The export data is the go command's own format
// (golang.org/x/tools/go/gcexportdata), so a snapshot keeps every detail
// the comparison needs, methods and unexported embedded fields included.
func (a GoAPI) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	fset := token.NewFileSet()
	for path, pkg := range a {
		var buf bytes.Buffer
		buf.WriteString(path + "\n")
		if err := gcexportdata.Write(&buf, fset, pkg); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		name := strings.ReplaceAll(path, "/", "_") + snapshotExt
		if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ReadGoAPI reads a snapshot that Write stored in folder dir.
func ReadGoAPI(dir string) (GoAPI, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*"+snapshotExt))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no API snapshot in %s", dir)
	}
	fset := token.NewFileSet()
	imports := map[string]*types.Package{}
	api := GoAPI{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := bufio.NewReader(bytes.NewReader(data))
		path, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: no import path", f)
		}
		path = strings.TrimSuffix(path, "\n")
		pkg, err := gcexportdata.Read(r, fset, imports, path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		api[path] = pkg
	}
	return api, nil
}

// GoBreaks returns the changes from old to cur that can break a program
// written against old, as golang.org/x/exp/apidiff decides them, sorted by
// subject. A subject is the package's name and the changed name
// ("agent.Config.Model"), or the import path of a removed package: what a
// CHANGELOG entry names in backticks.
func GoBreaks(old, cur GoAPI) []Break {
	var out []Break
	for path, o := range old {
		c, ok := cur[path]
		if !ok {
			out = append(out, Break{Face: "Go", Subject: path, Detail: "package removed"})
			continue
		}
		for _, ch := range apidiff.Changes(o, c).Changes {
			if ch.Compatible {
				continue
			}
			name, detail, ok := strings.Cut(ch.Message, ": ")
			if !ok {
				name, detail = "", ch.Message
			}
			subject := o.Name()
			if name != "" {
				subject += "." + strings.NewReplacer("(", "", ")", "", "*", "").Replace(name)
			}
			out = append(out, Break{Face: "Go", Subject: subject, Detail: detail})
		}
	}
	slices.SortFunc(out, func(a, b Break) int { return strings.Compare(a.Subject+a.Detail, b.Subject+b.Detail) })
	return out
}
