package server

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// complexityLimitCode is the error code of an operation over the limit,
// gqlgen's own, so that the presenter maps it as before.
const complexityLimitCode = "COMPLEXITY_LIMIT_EXCEEDED"

// costStat names the operation's complexity among the extensions of its
// Stats, where reportCost reads it.
const costStat = "bothy.complexity"

// ComplexityLimit refuses operations whose complexity exceeds Max and
// keeps every operation's cost for its answer (reportCost). It counts as
// gqlgen's extension.FixedComplexityLimit does (a field costs what the
// schema's complexity function says, else one plus its children; an
// interface field its costliest implementation), with one difference:
// fragments on different object types inside a selection of an interface
// or union are alternatives, not additions. Every value of such a
// selection has exactly one type, so it costs the fields common to all
// plus the fragments of its own type, at most those of the costliest type;
// summing all types would refuse a typed page of events whose cost is far
// below the limit.
type ComplexityLimit struct {
	Max int
	es  graphql.ExecutableSchema
}

var (
	_ graphql.HandlerExtension        = &ComplexityLimit{}
	_ graphql.OperationContextMutator = &ComplexityLimit{}
)

// ExtensionName implements graphql.HandlerExtension.
func (c *ComplexityLimit) ExtensionName() string { return "ComplexityLimit" }

// Validate implements graphql.HandlerExtension.
func (c *ComplexityLimit) Validate(es graphql.ExecutableSchema) error {
	c.es = es
	return nil
}

// MutateOperationContext implements graphql.OperationContextMutator: it
// counts the operation's cost, keeps it in the operation's Stats for the
// answer's extensions.cost, and refuses an operation over Max.
func (c *ComplexityLimit) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	op := oc.Doc.Operations.ForName(oc.OperationName)
	if op == nil {
		return nil
	}
	w := complexityWalker{ctx: ctx, es: c.es, schema: c.es.Schema(), vars: oc.Variables}
	n := w.selection(op.SelectionSet, "")
	// The answer reports the cost (reportCost), a refused one too: a
	// client learns by how much it is over.
	oc.Stats.SetExtension(costStat, n)
	if n > c.Max {
		err := gqlerror.Errorf("operation has complexity %d, which exceeds the limit of %d", n, c.Max)
		errcode.Set(err, complexityLimitCode)
		return err
	}
	return nil
}

type complexityWalker struct {
	ctx    context.Context
	es     graphql.ExecutableSchema
	schema *ast.Schema
	vars   map[string]any
}

// selection returns the cost of sel on the type named on ("" for the
// operation's root).
func (w complexityWalker) selection(sel ast.SelectionSet, on string) int {
	common := 0
	byType := map[string]int{}
	fragment := func(cond string, inner ast.SelectionSet) {
		if cond == "" {
			cond = on
		}
		n := w.selection(inner, cond)
		if def := w.schema.Types[cond]; cond == on || def == nil || def.Kind != ast.Object {
			// On the selection's own type or on an abstract type: it
			// may apply to every value.
			common = saturatingAdd(common, n)
			return
		}
		byType[cond] = saturatingAdd(byType[cond], n)
	}
	for _, s := range sel {
		switch s := s.(type) {
		case *ast.Field:
			common = saturatingAdd(common, w.field(s))
		case *ast.InlineFragment:
			fragment(s.TypeCondition, s.SelectionSet)
		case *ast.FragmentSpread:
			if s.Definition != nil {
				fragment(s.Definition.TypeCondition, s.Definition.SelectionSet)
			}
		}
	}
	most := 0
	for _, n := range byType {
		most = max(most, n)
	}
	return saturatingAdd(common, most)
}

// field returns the cost of one field with its selection.
func (w complexityWalker) field(f *ast.Field) int {
	if f.Definition == nil || f.ObjectDefinition == nil {
		return 0
	}
	def := w.schema.Types[f.Definition.Type.Name()]
	if def == nil || def.Name == "__Schema" {
		return 0
	}
	child := 0
	switch def.Kind {
	case ast.Object, ast.Interface, ast.Union:
		child = w.selection(f.SelectionSet, def.Name)
	default:
		// Scalars, enums and inputs have no selection to weigh.
	}
	args := f.ArgumentMap(w.vars)
	if f.ObjectDefinition.Kind != ast.Interface {
		return w.cost(f.ObjectDefinition.Name, f.Name, child, args)
	}
	most := 0
	for _, t := range w.schema.GetPossibleTypes(f.ObjectDefinition) {
		most = max(most, w.cost(t.Name, f.Name, child, args))
	}
	return most
}

// cost is the schema's complexity of typ.field, or one plus its children.
func (w complexityWalker) cost(typ, field string, child int, args map[string]any) int {
	if n, ok := w.es.Complexity(w.ctx, typ, field, child, args); ok && n >= 1 {
		return n
	}
	return saturatingAdd(1, child)
}

// saturatingAdd adds non-negative costs without overflowing, so that no
// operation can wrap its cost around to a small number.
func saturatingAdd(a, b int) int {
	a, b = max(a, 0), max(b, 0)
	if c := a + b; c >= a {
		return c
	}
	return int(^uint(0) >> 1)
}
