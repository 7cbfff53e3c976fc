package doccite

import "go/ast"

// goIndex holds the top-level names and the members of the types of the
// Go packages of the tree, by package name (the name a qualifier uses;
// packages of the same name in different folders are merged, which can
// only make the check more lenient). It is built from the files the
// comment check parses anyway, test files left out, and lives for one
// Check.
type goIndex struct {
	names map[string]map[string]bool      // package -> top-level names
	types map[string]map[string]*typeInfo // package -> type -> members
	byTyp map[string][]*typeInfo          // type name -> its types in every package
}

// typeInfo is one named type: its fields and methods (exported or not),
// and the types it embeds from its own package, whose members it promotes.
type typeInfo struct {
	pkg     string
	members map[string]bool
	embeds  []string
}

func newGoIndex() *goIndex {
	return &goIndex{names: map[string]map[string]bool{}, types: map[string]map[string]*typeInfo{}, byTyp: map[string][]*typeInfo{}}
}

// typ returns the entry of type name of package pkg, making it on first
// use (a method may be read before its type's declaration).
func (x *goIndex) typ(pkg, name string) *typeInfo {
	if x.types[pkg] == nil {
		x.types[pkg] = map[string]*typeInfo{}
	}
	t := x.types[pkg][name]
	if t == nil {
		t = &typeInfo{pkg: pkg, members: map[string]bool{}}
		x.types[pkg][name] = t
		x.byTyp[name] = append(x.byTyp[name], t)
	}
	return t
}

// add records the declarations of one parsed file.
func (x *goIndex) add(f *ast.File) {
	pkg := f.Name.Name
	if x.names[pkg] == nil {
		x.names[pkg] = map[string]bool{}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				x.names[pkg][d.Name.Name] = true
			} else if recv := baseType(d.Recv.List[0].Type); recv != "" {
				x.typ(pkg, recv).members[d.Name.Name] = true
			}
		case *ast.GenDecl:
			x.addGen(pkg, d)
		}
	}
}

// addGen records the names of a const, var or type declaration.
func (x *goIndex) addGen(pkg string, d *ast.GenDecl) {
	for _, s := range d.Specs {
		switch s := s.(type) {
		case *ast.ValueSpec:
			for _, n := range s.Names {
				x.names[pkg][n.Name] = true
			}
		case *ast.TypeSpec:
			x.names[pkg][s.Name.Name] = true
			t := x.typ(pkg, s.Name.Name)
			var fields *ast.FieldList
			switch st := s.Type.(type) {
			case *ast.StructType:
				fields = st.Fields
			case *ast.InterfaceType:
				fields = st.Methods
			}
			if fields == nil {
				continue
			}
			for _, fl := range fields.List {
				for _, n := range fl.Names {
					t.members[n.Name] = true
				}
				if len(fl.Names) == 0 { // embedded: its name is a member, its members are promoted
					if e := baseType(fl.Type); e != "" {
						t.members[e] = true
						t.embeds = append(t.embeds, e)
					}
				}
			}
		}
	}
}

// baseType returns the name of a receiver or embedded type: T, *T, T[K],
// pkg.T; "" for anything else.
func baseType(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return baseType(e.X)
	case *ast.IndexExpr:
		return baseType(e.X)
	case *ast.IndexListExpr:
		return baseType(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// hasMember reports whether t or a type it embeds (from its own package,
// up to a few levels) has the field or method name.
func (x *goIndex) hasMember(t *typeInfo, name string, depth int) bool {
	if t.members[name] {
		return true
	}
	if depth > 4 {
		return false
	}
	for _, e := range t.embeds {
		if et := x.types[t.pkg][e]; et != nil && x.hasMember(et, name, depth+1) {
			return true
		}
	}
	return false
}
