// Package apicompat finds the breaking changes between a released API
// contract and the current one, on both faces: the GraphQL schema
// (GraphQLBreaks, compared with gqlparser's schema model) and the OpenAPI
// document of the REST shim (OpenAPIBreaks, compared with oasdiff's
// backward-compatibility checks, an optional response property's removal
// counted as a break, a named schema's change named once). The
// compatibility gate of make test (TestNoUnlistedBreakingChanges) fails on
// a break that CHANGELOG.md does not list under the next version
// (Changelog.Unlisted).
package apicompat

import (
	"fmt"
	"slices"

	"github.com/vektah/gqlparser/v2/ast"
)

// Break is one breaking change: the face ("GraphQL" or "REST"), the
// element a client names (Subject: "Run.context", "Mutation.startRun(holder)",
// "POST /api/v1/runs/{id}/start", "#/components/schemas/Run") and what
// changed (Detail).
type Break struct {
	Face    string
	Subject string
	Detail  string
}

// String is the break as one line.
func (b Break) String() string { return fmt.Sprintf("%s %s: %s", b.Face, b.Subject, b.Detail) }

// GraphQLBreaks returns the changes from old to cur that can break a
// client written against old, sorted by subject:
//
//   - a type removed, or of another kind;
//   - a field of an object or interface removed, or of a type a client
//     of old cannot read (an output type may only become stricter: a
//     nullable type non-null, never the other way, nor another named type
//     or list depth);
//   - an argument or input field removed, of a type old's values do not
//     fit (an input type may only become looser), or a new one required
//     (non-null without a default);
//   - an enum value removed, a union member removed, an interface no
//     longer implemented.
//
// Additions (types, fields, optional arguments, enum values) are not
// breaks. Built-in and introspection types are not compared.
func GraphQLBreaks(old, cur *ast.Schema) []Break {
	var out []Break
	add := func(subject, format string, args ...any) {
		out = append(out, Break{Face: "GraphQL", Subject: subject, Detail: fmt.Sprintf(format, args...)})
	}
	for name, ot := range old.Types {
		if ot.BuiltIn || len(name) > 1 && name[:2] == "__" {
			continue
		}
		ct, ok := cur.Types[name]
		if !ok {
			add(name, "type removed")
			continue
		}
		if ct.Kind != ot.Kind {
			add(name, "kind changed from %s to %s", ot.Kind, ct.Kind)
			continue
		}
		typeBreaks(name, ot, ct, add)
	}
	bySubject(out)
	return out
}

// typeBreaks adds the breaks between ot and ct, the old and current
// definitions of type name, which are of the same kind.
func typeBreaks(name string, ot, ct *ast.Definition, add func(string, string, ...any)) {
	switch ot.Kind {
	case ast.Object, ast.Interface:
		fieldBreaks(name, ot, ct, add)
	case ast.InputObject:
		inputFieldBreaks(name, ot, ct, add)
	case ast.Enum:
		for _, v := range ot.EnumValues {
			if ct.EnumValues.ForName(v.Name) == nil {
				add(name+"."+v.Name, "enum value removed")
			}
		}
	case ast.Union:
		for _, m := range ot.Types {
			if !slices.Contains(ct.Types, m) {
				add(name, "union member %s removed", m)
			}
		}
	default:
		// A scalar has no members whose removal breaks a client.
	}
}

// fieldBreaks adds the breaks of the output fields (and their arguments)
// and of the interfaces of object or interface type name.
func fieldBreaks(name string, ot, ct *ast.Definition, add func(string, string, ...any)) {
	for _, of := range ot.Fields {
		if len(of.Name) > 1 && of.Name[:2] == "__" {
			continue
		}
		subject := name + "." + of.Name
		cf := ct.Fields.ForName(of.Name)
		if cf == nil {
			add(subject, "field removed")
			continue
		}
		if !outputFits(of.Type, cf.Type) {
			add(subject, "type changed from %s to %s", of.Type, cf.Type)
		}
		argBreaks(subject, of.Arguments, cf.Arguments, add)
	}
	for _, iface := range ot.Interfaces {
		if !slices.Contains(ct.Interfaces, iface) {
			add(name, "no longer implements %s", iface)
		}
	}
}

// inputFieldBreaks adds the breaks of the fields of input type name:
// removed or narrowed fields, and new required ones.
func inputFieldBreaks(name string, ot, ct *ast.Definition, add func(string, string, ...any)) {
	for _, of := range ot.Fields {
		subject := name + "." + of.Name
		cf := ct.Fields.ForName(of.Name)
		if cf == nil {
			add(subject, "input field removed")
			continue
		}
		if !inputFits(of.Type, cf.Type) {
			add(subject, "type changed from %s to %s", of.Type, cf.Type)
		}
	}
	for _, cf := range ct.Fields {
		if ot.Fields.ForName(cf.Name) == nil && required(cf.Type, cf.DefaultValue) {
			add(name+"."+cf.Name, "new required input field of type %s", cf.Type)
		}
	}
}

// argBreaks adds the breaks of a field's arguments.
func argBreaks(field string, old, cur ast.ArgumentDefinitionList, add func(string, string, ...any)) {
	for _, oa := range old {
		subject := field + "(" + oa.Name + ")"
		ca := cur.ForName(oa.Name)
		if ca == nil {
			add(subject, "argument removed")
			continue
		}
		if !inputFits(oa.Type, ca.Type) {
			add(subject, "type changed from %s to %s", oa.Type, ca.Type)
		}
	}
	for _, ca := range cur {
		if old.ForName(ca.Name) == nil && required(ca.Type, ca.DefaultValue) {
			add(field+"("+ca.Name+")", "new required argument of type %s", ca.Type)
		}
	}
}

// outputFits reports whether a client that reads values of type old can
// read values of type cur: the same named type and list depth, each level
// as strict or stricter (non-null where old allowed null).
func outputFits(old, cur *ast.Type) bool {
	if old == nil || cur == nil {
		return old == cur
	}
	if old.NonNull && !cur.NonNull {
		return false
	}
	if (old.Elem == nil) != (cur.Elem == nil) {
		return false
	}
	if old.Elem != nil {
		return outputFits(old.Elem, cur.Elem)
	}
	return old.NamedType == cur.NamedType
}

// inputFits reports whether every value a client sends for type old is a
// valid value of type cur: the same named type and list depth, each level
// as loose or looser (nullable where old required a value). It is
// outputFits read the other way: the server now reads what the client
// writes.
func inputFits(old, cur *ast.Type) bool { return outputFits(cur, old) }

// required reports whether an argument or input field must be sent: a
// non-null type without a default.
func required(t *ast.Type, def *ast.Value) bool { return t.NonNull && def == nil }
