package graph_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// caseFuncs are the string functions that change a letter's case: an enum
// value converted by one of them is a hand-written copy of gqlgen's enum
// (a new value, or one spelled differently in a store, passes unseen).
var caseFuncs = map[string]bool{"ToUpper": true, "ToLower": true, "Title": true, "ToTitle": true, "EqualFold": true}

// TestNoEnumCaseConversion is the house rule of issue 48: the GraphQL face
// converts between the modules' values and the schema's enums through the
// generated enum types and explicit tables (convert.go), never by changing
// the case of a string. Hand-written files only: generated code is
// gqlgen's.
func TestNoEnumCaseConversion(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if ast.IsGenerated(f) {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if ok && (pkg.Name == "strings" || pkg.Name == "cases") && caseFuncs[sel.Sel.Name] {
				t.Errorf("%s: %s.%s: convert enum values through the generated enum types and a table, not by case",
					fset.Position(sel.Pos()), pkg.Name, sel.Sel.Name)
			}
			return true
		})
	}
	if len(files) == 0 || !strings.HasSuffix(files[0], ".go") {
		t.Fatal("no Go files read: the test runs in the wrong folder")
	}
}
