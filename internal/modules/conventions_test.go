package modules_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// wiring is the one package outside tests that makes the modules' raw
// writers (README.md#architecture, "Where is a right checked?").
const wiring = "internal/modules"

// modulePackages are the domain modules whose NewWriter makes a raw writer.
var modulePackages = []string{"identity", "authz", "chat", "events", "messaging", "runs", "admin", "feed", "retention"}

// testSupport are the harnesses only tests import; they may make writers
// for a test's setup like a _test.go file.
var testSupport = []string{"internal/devtools/apitest", "internal/devtools/moduletest", "internal/platform/pgtest"}

// goFile is one parsed non-test Go file of the repository.
type goFile struct {
	pkg  string // folder from the repository root
	path string
	file *ast.File
	fset *token.FileSet
}

// sourceFiles parses every non-test Go file under internal/ and graph/
// (generated code excepted).
func sourceFiles(t *testing.T) []goFile {
	t.Helper()
	root := moduletest.RepoRoot(t)
	var out []goFile
	for _, top := range []string{"internal", "graph", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "generated" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			out = append(out, goFile{pkg: filepath.ToSlash(rel), path: path, file: f, fset: fset})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// embeddedStores returns the positions of struct types in f that embed a
// type named store (or *store): its methods would be promoted into the
// module's API.
func embeddedStores(g goFile) []string {
	var out []string
	ast.Inspect(g.file, func(n ast.Node) bool {
		st, ok := n.(*ast.StructType)
		if !ok {
			return true
		}
		for _, f := range st.Fields.List {
			if len(f.Names) > 0 {
				continue
			}
			typ := f.Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok && strings.HasSuffix(strings.ToLower(id.Name), "store") {
				out = append(out, g.fset.Position(f.Pos()).String())
			}
		}
		return true
	})
	return out
}

// writerMakers returns the positions in f of calls to a package's
// NewWriter other than its own.
func writerMakers(g goFile) []string {
	var out []string
	ast.Inspect(g.file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewWriter" {
			if id, ok := sel.X.(*ast.Ident); ok && slices.Contains(modulePackages, id.Name) {
				out = append(out, g.fset.Position(call.Pos()).String())
			}
		}
		return true
	})
	return out
}

// TestOneRightsConvention: no struct embeds a store (so no raw statement
// is promoted into a module's API), and only the wiring makes a module's
// raw Writer.
func TestOneRightsConvention(t *testing.T) {
	t.Parallel()
	files := sourceFiles(t)
	if len(files) < 50 {
		t.Fatalf("found only %d source files: the walk is broken", len(files))
	}
	for _, g := range files {
		for _, pos := range embeddedStores(g) {
			t.Errorf("%s embeds a store: keep it as an unexported field (st store) and hand neighbours a Writer or a fact", pos)
		}
		if g.pkg == wiring || slices.Contains(testSupport, g.pkg) {
			continue
		}
		for _, pos := range writerMakers(g) {
			t.Errorf("%s makes a module's raw Writer: only %s does, at wiring", pos, wiring)
		}
	}
}

// TestOneRightsConventionDetects keeps the detectors honest on sources
// that break the convention.
func TestOneRightsConventionDetects(t *testing.T) {
	t.Parallel()
	src := `package x
type store struct{}
type Service struct {
	*store
	name string
}
type Other struct{ st store }
func f() { _ = chat.NewWriter(nil); _ = NewWriter(nil) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := goFile{pkg: "internal/x", path: "x.go", file: f, fset: fset}
	if got := embeddedStores(g); len(got) != 1 || !strings.HasPrefix(got[0], "x.go:4:") {
		t.Errorf("embedded stores = %v, want the one on line 4", got)
	}
	if got := writerMakers(g); len(got) != 1 || !strings.HasPrefix(got[0], "x.go:8:") {
		t.Errorf("writer makers = %v, want chat.NewWriter on line 8", got)
	}
}
