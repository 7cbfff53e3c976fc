package agent_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoPath matches a path of Bothy's repository (docs/adapter.md,
// sdk/agent, schema/...) that is not part of an import path.
var repoPath = regexp.MustCompile(`(^|[^\w./])(docs|sdk|internal|cmd|graph|schema|migrations|contrib)/[\w./#-]+`)

// TestDocCommentsNameNoRepositoryPaths: the module's documentation is
// read on pkg.go.dev and in editors, far from Bothy's repository, so the
// comments of its library packages name guides and packages (by import
// path), never a file of the repository. Test files with Example
// functions count too: pkg.go.dev shows each example with its comments.
func TestDocCommentsNameNoRepositoryPaths(t *testing.T) {
	t.Parallel()
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil || f.Name.Name == "main" {
			return err
		}
		full, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") && !hasExample(full) {
			// Other tests are read in the repository, where its paths mean
			// something.
			return nil
		}
		for _, g := range full.Comments {
			for _, line := range strings.Split(g.Text(), "\n") {
				if m := repoPath.FindString(line); m != "" {
					t.Errorf("%s: a comment names the repository path %q: %s", path, strings.TrimLeft(m, " ("), line)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hasExample tells whether f declares an Example function, which
// pkg.go.dev shows with the package's documentation.
func hasExample(f *ast.File) bool {
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Example") {
			return true
		}
	}
	return false
}
