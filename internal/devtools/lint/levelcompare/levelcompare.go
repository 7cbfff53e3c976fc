// Package levelcompare is the analyzer behind a rule of the rights door: no
// package but internal/authz compares authorization levels (a binary <,
// <=, >, >=, == or != with an operand of type authz.Level, or a switch on
// one). A module that needs a right asks the doors (Authorize, Filter,
// Allowed), which decide by the rule table; listing levels as data (the
// world's grant table) is no comparison. Test files and generated files
// are left out. make test runs it through go vet (cmd/bothyvet), whose
// results are cached per package.
package levelcompare

import (
	"go/ast"
	"go/token"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// LevelPackage is the import path of the package whose type Level the
// analyzer guards (its flag -levelpkg).
const LevelPackage = "bothy.example.com/bothy/internal/authz"

// Analyzer reports every comparison of a Level of the level package
// outside that package and its subpackages.
var Analyzer = &analysis.Analyzer{
	Name: "levelcompare",
	Doc:  "reports comparisons of authz.Level outside internal/authz: rights are decided by the door (Authorize, Filter, Allowed)",
	URL:  "https://bothy.example.com/docs/design/rights",
	Run:  run,
}

// levelPkg is the value of the flag -levelpkg.
var levelPkg = LevelPackage

func init() {
	Analyzer.Flags.StringVar(&levelPkg, "levelpkg", LevelPackage, "import path of the package that defines the guarded type Level")
}

// run reports the level comparisons in the non-test, non-generated files of
// pass's package, unless it is the level package or one below it.
func run(pass *analysis.Pass) (any, error) {
	path := pass.Pkg.Path()
	// A test package of the level package (authz_test) may compare too.
	path = strings.TrimSuffix(path, "_test")
	if path == levelPkg || strings.HasPrefix(path, levelPkg+"/") {
		return nil, nil
	}
	for _, f := range pass.Files {
		if ast.IsGenerated(f) || strings.HasSuffix(pass.Fset.File(f.Pos()).Name(), "_test.go") {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			reportComparison(pass, n)
			return true
		})
	}
	return nil, nil
}

// reportComparison reports n when it is a comparison of levels: a binary
// comparison with a level operand, or a switch on a level.
func reportComparison(pass *analysis.Pass, n ast.Node) {
	switch n := n.(type) {
	case *ast.BinaryExpr:
		switch n.Op {
		case token.LSS, token.LEQ, token.GTR, token.GEQ, token.EQL, token.NEQ:
			if isLevel(pass, n.X) || isLevel(pass, n.Y) {
				pass.Reportf(n.OpPos, "compares authorization levels outside internal/authz; decide the right through authz.Authorize, Filter or Allowed")
			}
		default:
			// Arithmetic and logic on levels are not comparisons.
		}
	case *ast.SwitchStmt:
		if n.Tag != nil && isLevel(pass, n.Tag) {
			pass.Reportf(n.Switch, "switches on an authorization level outside internal/authz; decide the right through authz.Authorize, Filter or Allowed")
		}
	}
}

// isLevel reports whether e is of type Level of the level package.
func isLevel(pass *analysis.Pass, e ast.Expr) bool {
	n, ok := pass.TypesInfo.TypeOf(e).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == levelPkg && n.Obj().Name() == "Level"
}
