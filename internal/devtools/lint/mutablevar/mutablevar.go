// Package mutablevar is the analyzer of the house rule "no exported
// mutable package variable" (issue 48): an exported package-level map or
// slice can be changed by any importer, so a table that decides (rights,
// routes) could be rewritten at run time or by a test of another package
// without a trace. Such tables are unexported, read through functions.
package mutablevar

import (
	"go/ast"
	"go/types"
	"strings"

	"golang.org/x/tools/go/analysis"
)

// Analyzer reports exported package-level variables of map or slice type
// in hand-written, non-test files.
var Analyzer = &analysis.Analyzer{
	Name: "mutablevar",
	Doc:  "reports exported package-level maps and slices: keep tables unexported and read them through functions",
	Run:  run,
}

// run walks the package's top-level var declarations.
func run(pass *analysis.Pass) (any, error) {
	for _, f := range pass.Files {
		name := pass.Fset.Position(f.Pos()).Filename
		// Generated code (gqlgen's All<Enum> slices) and tests are not the
		// rule's: nothing imports a test's variables.
		if ast.IsGenerated(f) || strings.HasSuffix(name, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				report(pass, vs)
			}
		}
	}
	return nil, nil
}

// report reports each exported name of vs whose type is a map or a slice.
func report(pass *analysis.Pass, vs *ast.ValueSpec) {
	for _, id := range vs.Names {
		if !id.IsExported() {
			continue
		}
		obj, ok := pass.TypesInfo.Defs[id].(*types.Var)
		if !ok {
			continue
		}
		switch obj.Type().Underlying().(type) {
		case *types.Map, *types.Slice:
			pass.Reportf(id.Pos(), "exported package variable %s is a mutable %s: make it unexported and read it through a function", id.Name, kindOf(obj.Type()))
		}
	}
}

// kindOf names the kind of t for the message.
func kindOf(t types.Type) string {
	if _, ok := t.Underlying().(*types.Map); ok {
		return "map"
	}
	return "slice"
}
