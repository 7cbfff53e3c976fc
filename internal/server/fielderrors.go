package server

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/internal/platform/problem"
)

// The modules name invalid members with the REST vocabulary: a JSON pointer
// into the body ("/first_message/run_id") or a parameter name ("after").
// On GraphQL a client needs the argument path of its own request instead
// ("input.firstMessage.runId"); graphQLField translates one into the other
// with the arguments of the field that failed.

// graphQLField returns the GraphQL argument path of pointer for the field
// being resolved in ctx, or "" when ctx resolves no field or no argument
// holds the member.
func graphQLField(ctx context.Context, schema *ast.Schema, pointer string) string {
	fc := graphql.GetFieldContext(ctx)
	if fc == nil || fc.Field.Definition == nil {
		return ""
	}
	var segs []string
	for _, s := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		if s != "" {
			segs = append(segs, lowerCamel(s))
		}
	}
	if len(segs) == 0 {
		return ""
	}
	args := fc.Field.Definition.Arguments
	if args.ForName(segs[0]) != nil {
		return strings.Join(segs, ".")
	}
	// A member of an input object argument (input: MessageCreate, ...).
	for _, a := range args {
		def := schema.Types[a.Type.Name()]
		if def != nil && def.Kind == ast.InputObject && def.Fields.ForName(segs[0]) != nil {
			return a.Name + "." + strings.Join(segs, ".")
		}
	}
	return ""
}

// lowerCamel turns a snake_case member name into the lowerCamelCase of
// GraphQL ("run_id" becomes "runId"); a name without "_" stays as it is.
func lowerCamel(s string) string {
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// fieldErrorsMessage is the message of a GraphQL error with field errors
// and no detail of its own: the title, then each field with its code, so a
// client that shows only the message still learns what to fix.
func fieldErrorsMessage(title string, fields []map[string]any) string {
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		name, _ := f["field"].(string)
		if name == "" {
			name, _ = f["pointer"].(string)
		}
		part := name + ": " + f["code"].(string)
		if d, _ := f["detail"].(string); d != "" {
			part += " (" + d + ")"
		}
		parts = append(parts, part)
	}
	return title + ": " + strings.Join(parts, "; ")
}

// presentFields renders p's field errors for GraphQL: each keeps its REST
// pointer (the REST shim answers with it) and gains field, the argument
// path of the GraphQL request.
func presentFields(ctx context.Context, schema *ast.Schema, fields []problem.FieldError) []map[string]any {
	out := make([]map[string]any, len(fields))
	for i, f := range fields {
		m := map[string]any{"pointer": f.Pointer, "code": f.Code}
		if name := graphQLField(ctx, schema, f.Pointer); name != "" {
			m["field"] = name
		}
		if f.Detail != "" {
			m["detail"] = f.Detail
		}
		out[i] = m
	}
	return out
}
