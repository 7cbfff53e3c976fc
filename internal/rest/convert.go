package rest

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph/scalars"
	"bothy.example.com/bothy/internal/platform/answerbuf"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// Snake turns a GraphQL field name (camelCase) into its REST member name
// (snake_case): displayName -> display_name, runId -> run_id.
func Snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// input converts a decoded JSON body value into the GraphQL variable value of
// type t, collecting field errors with JSON pointers: unknown_member for a
// member the input type does not have, invalid_enum for a value outside an
// enum, invalid_type for a value of the wrong JSON type, required for a
// missing required member, null_not_allowed for a JSON null (the document
// has no null: an optional member is absent or has a value),
// invalid_characters for a string PostgreSQL cannot store and invalid_time
// for a date-time that is not RFC 3339.
func (s *Shim) input(v any, t *ast.Type, ptr string) (any, []problem.FieldError) {
	if v == nil {
		return nil, []problem.FieldError{{Pointer: ptr, Code: "null_not_allowed", Detail: "leave the member out instead of null"}}
	}
	if t.Elem != nil {
		return s.listInput(v, t.Elem, ptr)
	}
	def := s.schema.Types[t.NamedType]
	switch def.Kind {
	case ast.InputObject:
		return s.objectInput(v, def, ptr)
	case ast.Enum:
		str, ok := v.(string)
		if !ok || str != strings.ToLower(str) || def.EnumValues.ForName(strings.ToUpper(str)) == nil {
			return nil, []problem.FieldError{{Pointer: ptr, Code: "invalid_enum"}}
		}
		return strings.ToUpper(str), nil
	default:
		return scalarInput(v, def.Name, ptr)
	}
}

// listInput is input for a list of elem: each element is converted, its
// errors pointing at its index.
func (s *Shim) listInput(v any, elem *ast.Type, ptr string) (any, []problem.FieldError) {
	list, ok := v.([]any)
	if !ok {
		return nil, []problem.FieldError{{Pointer: ptr, Code: "invalid_type", Detail: "must be an array"}}
	}
	out := make([]any, len(list))
	var errs []problem.FieldError
	for i, e := range list {
		var fe []problem.FieldError
		out[i], fe = s.input(e, elem, ptr+"/"+strconv.Itoa(i))
		errs = append(errs, fe...)
	}
	return out, errs
}

// objectInput is input for the input object def: members are named in
// snake_case in the body and by their GraphQL names in the variables.
func (s *Shim) objectInput(v any, def *ast.Definition, ptr string) (any, []problem.FieldError) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []problem.FieldError{{Pointer: ptr, Code: "invalid_type", Detail: "must be an object"}}
	}
	out := map[string]any{}
	var errs []problem.FieldError
	byMember := map[string]*ast.FieldDefinition{}
	for _, f := range def.Fields {
		byMember[Snake(f.Name)] = f
	}
	for k, val := range obj {
		f, ok := byMember[k]
		if !ok {
			errs = append(errs, problem.FieldError{Pointer: ptr + "/" + escapePointer(k), Code: "unknown_member"})
			continue
		}
		cv, fe := s.input(val, f.Type, ptr+"/"+k)
		errs = append(errs, fe...)
		if cv != nil {
			out[f.Name] = cv
		}
	}
	for _, f := range def.Fields {
		if _, present := obj[Snake(f.Name)]; !present && f.Type.NonNull && f.DefaultValue == nil {
			errs = append(errs, problem.FieldError{Pointer: ptr + "/" + Snake(f.Name), Code: "required"})
		}
	}
	return out, errs
}

// scalarInput is input for the scalar type name.
func scalarInput(v any, name, ptr string) (any, []problem.FieldError) {
	bad := []problem.FieldError{{Pointer: ptr, Code: "invalid_type"}}
	switch name {
	case "Int":
		return intInput(v, ptr)
	case "Float":
		n, ok := v.(json.Number)
		if !ok {
			return nil, bad
		}
		f, err := n.Float64()
		if err != nil {
			return nil, bad
		}
		return f, nil
	case "Boolean":
		b, ok := v.(bool)
		if !ok {
			return nil, bad
		}
		return b, nil
	case "Time":
		str, ok := v.(string)
		if !ok {
			return nil, bad
		}
		if _, err := scalars.UnmarshalTime(str); err != nil {
			return nil, []problem.FieldError{{Pointer: ptr, Code: scalars.InvalidTime, Detail: scalars.TimeDetail}}
		}
		return str, nil
	default: // String, ID and other string scalars
		str, ok := v.(string)
		if !ok {
			return nil, bad
		}
		if fe := text.Check(str, ptr); fe != nil {
			return nil, []problem.FieldError{*fe}
		}
		return str, nil
	}
}

// intInput is scalarInput for Int, GraphQL's 32-bit integer.
func intInput(v any, ptr string) (any, []problem.FieldError) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, []problem.FieldError{{Pointer: ptr, Code: "invalid_type"}}
	}
	i, err := n.Int64()
	if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
		// GraphQL's Int is 32 bits wide.
		return nil, []problem.FieldError{{Pointer: ptr, Code: "invalid_type", Detail: "must be a 32-bit integer"}}
	}
	return i, nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// recorder captures the GraphQL handler's answer inside the shim.
type recorder struct {
	header http.Header
	status int
	body   *bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if r.body.Len() == 0 {
		// The GraphQL transport declares the answer's length: the buffer
		// grows once to it instead of doubling on the way.
		if n, err := strconv.Atoi(r.header.Get("Content-Length")); err == nil && n > 0 && n <= answerbuf.MaxPooled {
			r.body.Grow(n)
		}
	}
	return r.body.Write(b)
}
