package devtools_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// problemPath is the import path of the package whose Internal makes the
// server's internal errors.
const problemPath = "bothy.example.com/bothy/internal/platform/problem"

// opSite is one call of problem.Internal whose op is a string literal.
type opSite struct {
	op   string
	line int
}

// TestInternalErrorsNameTheirStep keeps the rule of issue 48, "operation
// names that say which statement failed": within one function declaration
// (the function literals inside it included) no two calls of
// problem.Internal pass the same literal op. The op is what the log line of
// an internal error names, so a repeated op ("messaging.delete" six times)
// leaves the reader unable to tell which statement failed; each call site
// adds a few words naming its step ("messaging.delete: lock message").
// It reads every hand-written non-test file of the server module: generated
// files, test files, internal/devtools, bin/, node_modules/ and other modules
// (sdk/ and the like) aside.
func TestInternalErrorsNameTheirStep(t *testing.T) {
	t.Parallel()
	const root = "../.."
	files := serverSources(t, root)
	fset := token.NewFileSet()
	calls := 0
	for _, path := range files {
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		name := problemName(file)
		if name == "" || ast.IsGenerated(file) {
			continue
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			sites := internalOps(fset, fn, name)
			calls += len(sites)
			for _, finding := range repeatedOps(filepath.ToSlash(rel), funcName(fn), sites) {
				t.Error(finding)
			}
		}
	}
	if len(files) < 100 || calls < 100 {
		t.Fatalf("read %d files and %d calls of problem.Internal; the check read too little to mean anything", len(files), calls)
	}
}

// serverSources lists the non-test .go files of the module rooted at root,
// leaving out internal/devtools, bin/, node_modules/, testdata/, hidden
// folders and every folder holding another module (sdk/ among them).
func serverSources(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(path, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// skipDir reports whether the walk leaves out the folder at path.
func skipDir(path, name string) bool {
	switch name {
	case "bin", "node_modules", "testdata":
		return true
	}
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	switch filepath.ToSlash(path) {
	case "../../internal/devtools", "../../sdk":
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// problemName is the name file imports the problem package under, or ""
// when it does not import it.
func problemName(file *ast.File) string {
	for _, spec := range file.Imports {
		if path, _ := strconv.Unquote(spec.Path.Value); path != problemPath {
			continue
		}
		if spec.Name != nil {
			return spec.Name.Name
		}
		return "problem"
	}
	return ""
}

// internalOps collects the literal ops of the calls of pkg.Internal in fn,
// the function literals inside it included.
func internalOps(fset *token.FileSet, fn *ast.FuncDecl, pkg string) []opSite {
	var sites []opSite
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Internal" {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != pkg {
			return true
		}
		lit, ok := call.Args[0].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		op, err := strconv.Unquote(lit.Value)
		if err == nil {
			sites = append(sites, opSite{op: op, line: fset.Position(lit.Pos()).Line})
		}
		return true
	})
	return sites
}

// repeatedOps names, for each op used more than once among sites, every
// place it is used.
func repeatedOps(file, fn string, sites []opSite) []string {
	lines := map[string][]int{}
	var order []string
	for _, s := range sites {
		if _, seen := lines[s.op]; !seen {
			order = append(order, s.op)
		}
		lines[s.op] = append(lines[s.op], s.line)
	}
	var findings []string
	for _, op := range order {
		if len(lines[op]) < 2 {
			continue
		}
		for _, line := range lines[op] {
			findings = append(findings, fmt.Sprintf("%s:%d: %s: op %q is used %d times in the function; add the step that failed (%q)",
				file, line, fn, op, len(lines[op]), op+": <step>"))
		}
	}
	return findings
}

// funcName is fn's name, with its receiver type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	switch r := recv.(type) {
	case *ast.IndexExpr:
		recv = r.X
	case *ast.IndexListExpr:
		recv = r.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
