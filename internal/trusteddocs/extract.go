package trusteddocs

import (
	"fmt"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// Operation is one operation of a client's documents with its hash.
type Operation struct {
	// Name is the operation's name; empty for an anonymous one.
	Name string
	// Hash is Hash of the operation: its line in a trusted-documents file.
	Hash string
	// Source names the file the operation was written in.
	Source string
}

// Extract returns every operation of sources (a client's .graphql files;
// a fragment may live in another file than the operations that use it)
// with its hash, in the order written, each validated against schema as
// the document of its own that Canonical prints.
//
// Errors: a source that does not parse, an operation that uses a fragment
// defined nowhere, two fragments of one name, or an operation that does not
// validate (with its file and name); nothing is returned then.
func Extract(schema *ast.Schema, sources []*ast.Source) ([]Operation, error) {
	all := &ast.QueryDocument{}
	for _, src := range sources {
		doc, err := parser.ParseQuery(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Name, err)
		}
		all.Operations = append(all.Operations, doc.Operations...)
		for _, f := range doc.Fragments {
			if all.Fragments.ForName(f.Name) != nil {
				return nil, fmt.Errorf("%s: fragment %s is defined twice", src.Name, f.Name)
			}
			all.Fragments = append(all.Fragments, f)
		}
	}
	out := make([]Operation, 0, len(all.Operations))
	for _, op := range all.Operations {
		where := op.Position.Src.Name
		text := Canonical(all, op)
		one, err := parser.ParseQuery(&ast.Source{Name: where, Input: text})
		if err != nil {
			return nil, fmt.Errorf("%s: operation %q: %w", where, op.Name, err)
		}
		if errs := validator.ValidateWithRules(schema, one, nil); len(errs) > 0 {
			return nil, fmt.Errorf("%s: operation %q: %s", where, op.Name, errs[0].Message)
		}
		out = append(out, Operation{Name: op.Name, Hash: Hash(all, op), Source: where})
	}
	return out, nil
}
