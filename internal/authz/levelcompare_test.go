package authz_test

import (
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"bothy.example.com/bothy/internal/moduletest"
)

const authzPath = "bothy.example.com/bothy/internal/authz"

// TestNoLevelComparisonOutsideAuthz keeps rights in one place: no non-test
// Go file of the module outside internal/authz compares authorization
// levels (a binary <, <=, >, >=, == or != with an operand of type
// authz.Level, or a switch on one). A module that needs a right asks the
// doors (Authorize, Filter, Allowed), which decide by the rule table.
// Listing levels as data (the world's grant table) is no comparison.
func TestNoLevelComparisonOutsideAuthz(t *testing.T) {
	t.Parallel()
	root := moduletest.RepoRoot(t)
	found := levelComparisons(t, root, "./...", authzPath)
	for _, f := range found {
		t.Errorf("%s compares authorization levels outside internal/authz; decide the right through authz.Authorize, Filter or Allowed", f)
	}
}

// TestLevelComparisonCheckFindsViolations runs the same check on a fixture
// module (testdata/levelcheck) that holds every kind of violation, so that
// the check above cannot pass by finding nothing.
func TestLevelComparisonCheckFindsViolations(t *testing.T) {
	t.Parallel()
	dir, err := filepath.Abs(filepath.Join("testdata", "levelcheck"))
	if err != nil {
		t.Fatal(err)
	}
	found := levelComparisons(t, dir, "./...", "example.com/levelcheck/authz")
	want := []string{"bad.go:9:", "bad.go:12:", "bad.go:15:", "bad.go:18:"}
	if len(found) != len(want) {
		t.Fatalf("found %d comparisons %q, want %d at %v", len(found), found, len(want), want)
	}
	for i, w := range want {
		if !strings.Contains(found[i], "/bad/"+w) {
			t.Errorf("finding %d is %s, want one at bad/%s", i, found[i], w)
		}
	}
}

// levelComparisons loads the packages of pattern in dir with their types
// and returns the position of every comparison of a value of type Level
// of package levelPkg, outside levelPkg and generated files.
func levelComparisons(t *testing.T, dir, pattern, levelPkg string) []string {
	t.Helper()
	cfg := &packages.Config{Dir: dir, Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	if len(pkgs) == 0 {
		t.Fatalf("no packages in %s", dir)
	}
	isLevel := func(tv types.Type) bool {
		n, ok := tv.(*types.Named)
		return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == levelPkg && n.Obj().Name() == "Level"
	}
	var out []string
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("package %s: %v", p.PkgPath, e)
		}
		if p.PkgPath == levelPkg || strings.HasPrefix(p.PkgPath, levelPkg+"/") {
			continue
		}
		for _, f := range p.Syntax {
			if ast.IsGenerated(f) {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var at token.Pos
				switch n := n.(type) {
				case *ast.BinaryExpr:
					switch n.Op {
					case token.LSS, token.LEQ, token.GTR, token.GEQ, token.EQL, token.NEQ:
						if isLevel(p.TypesInfo.TypeOf(n.X)) || isLevel(p.TypesInfo.TypeOf(n.Y)) {
							at = n.OpPos
						}
					}
				case *ast.SwitchStmt:
					if n.Tag != nil && isLevel(p.TypesInfo.TypeOf(n.Tag)) {
						at = n.Switch
					}
				}
				if at.IsValid() {
					out = append(out, p.Fset.Position(at).String())
				}
				return true
			})
		}
	}
	return out
}
