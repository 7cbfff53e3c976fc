package rest

import (
	"bytes"
	"errors"

	"github.com/vektah/gqlparser/v2/ast"
)

// The REST body is rendered from the GraphQL answer's JSON in one pass over
// its bytes, guided by the schema: member names become snake_case, members
// whose value is null and __ members are left out, null list elements are
// dropped, enum values are lowercased, and strings, numbers and JSON
// scalars are copied as they are. Nothing is decoded into generic values
// and nothing is encoded twice.

// errSyntax reports an answer that is not the JSON the executor writes.
var errSyntax = errors.New("rest: the GraphQL answer is not valid JSON")

// typeInfo is what rendering needs of one type: its definition and, for
// an object or interface, each field's type, the typeInfo of the named type
// under its list wrappers, and its REST name, by field name. The table is
// built once from the schema (a fixed set), so that rendering a member costs
// at most one lookup that allocates nothing, and a member's value none.
type typeInfo struct {
	def    *ast.Definition
	fields map[string]*fieldInfo
}

type fieldInfo struct {
	name  string
	typ   *ast.Type
	named *typeInfo // nil for a type the schema does not define
	snake string
}

// typeTable returns the typeInfo of every type of schema.
func typeTable(schema *ast.Schema) map[string]*typeInfo {
	out := map[string]*typeInfo{}
	for name, def := range schema.Types {
		out[name] = &typeInfo{def: def}
	}
	for _, ti := range out {
		if ti.def.Kind != ast.Object && ti.def.Kind != ast.Interface {
			continue
		}
		ti.fields = make(map[string]*fieldInfo, len(ti.def.Fields))
		for _, f := range ti.def.Fields {
			ti.fields[f.Name] = &fieldInfo{name: f.Name, typ: f.Type, named: out[f.Type.Name()], snake: Snake(f.Name)}
		}
	}
	return out
}

// memberHint is one member of the last element of a list: the elements of
// one list are written by one selection, so the next element's member at
// the same place is almost always the same field; comparing its name with
// the hint's spares the lookup.
type memberHint struct {
	owner *typeInfo
	f     *fieldInfo
}

// scanner walks one JSON document.
type scanner struct {
	in  []byte
	pos int
}

func (s *scanner) ws() {
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.pos >= len(s.in) {
		return 0
	}
	return s.in[s.pos]
}

func (s *scanner) expect(c byte) error {
	if s.peek() != c {
		return errSyntax
	}
	s.pos++
	return nil
}

// str returns the raw bytes of the string at pos, quotes included. It
// jumps from quote to quote (bytes.IndexByte): a quote is escaped when an
// odd number of backslashes stands right before it.
func (s *scanner) str() ([]byte, error) {
	if s.peek() != '"' {
		return nil, errSyntax
	}
	start := s.pos
	for i := start + 1; ; {
		j := bytes.IndexByte(s.in[i:], '"')
		if j < 0 {
			return nil, errSyntax
		}
		q := i + j
		n := 0
		for b := q - 1; b > start && s.in[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			s.pos = q + 1
			return s.in[start:s.pos], nil
		}
		i = q + 1
	}
}

// key returns an object member name; names the executor writes are field
// names and aliases, which never need escapes. The bytes are the answer's
// own: compared and looked up, never kept.
func (s *scanner) key() ([]byte, error) {
	raw, err := s.str()
	if err != nil {
		return nil, err
	}
	if err := s.expect(':'); err != nil {
		return nil, err
	}
	return raw[1 : len(raw)-1], nil
}

// skip passes over one value and returns its raw bytes.
func (s *scanner) skip() ([]byte, error) {
	s.ws()
	start := s.pos
	if s.pos >= len(s.in) {
		return nil, errSyntax
	}
	switch s.in[s.pos] {
	case '"':
		return s.str()
	case '{', '[':
		depth := 0
		for s.pos < len(s.in) {
			switch s.in[s.pos] {
			case '"':
				if _, err := s.str(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return s.in[start:s.pos], nil
				}
			}
			s.pos++
		}
		return nil, errSyntax
	default:
		for s.pos < len(s.in) && !isEnd(s.in[s.pos]) && !isSpace(s.in[s.pos]) {
			s.pos++
		}
		if s.pos == start {
			return nil, errSyntax
		}
		return s.in[start:s.pos], nil
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isEnd(c byte) bool { return c == ',' || c == '}' || c == ']' || c == ':' }

// isNull reports whether the next value is null (and consumes it if so).
func (s *scanner) isNull() bool {
	s.ws()
	if len(s.in)-s.pos >= 4 && string(s.in[s.pos:s.pos+4]) == "null" {
		s.pos += 4
		return true
	}
	return false
}

// member finds member name of the object at the scanner's position and
// returns a scanner at its value (nil when absent), leaving s unchanged.
func (s scanner) member(name string) (*scanner, error) {
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	if s.peek() == '}' {
		return nil, nil
	}
	for {
		k, err := s.key()
		if err != nil {
			return nil, err
		}
		if string(k) == name {
			s.ws()
			return &s, nil
		}
		if _, err := s.skip(); err != nil {
			return nil, err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			return nil, nil
		default:
			return nil, errSyntax
		}
	}
}

// renderJSON appends the REST rendering of the value at sc, of GraphQL
// type t, to out; omit names members of the outermost object to leave out.
func (sh *Shim) renderJSON(out []byte, sc *scanner, t *ast.Type, omit []string) ([]byte, error) {
	return sh.render(out, sc, t, sh.types[t.Name()], omit, nil)
}

// render is renderJSON with the typeInfo of t's named type (nil when the
// schema has none) and, for the elements of a list, the hint of the
// members of the element before: a null as is, then a list, an object
// (or interface), an enum value, or any other value copied as it is.
func (sh *Shim) render(out []byte, sc *scanner, t *ast.Type, info *typeInfo, omit []string, hint *[]memberHint) ([]byte, error) {
	if sc.isNull() {
		return append(out, "null"...), nil
	}
	if t.Elem != nil {
		return sh.renderList(out, sc, t.Elem, info)
	}
	if info != nil && info.def.Kind == ast.Interface {
		info = sh.concrete(sc, info)
	}
	switch {
	case info != nil && (info.def.Kind == ast.Object || info.def.Kind == ast.Interface):
		return sh.renderObject(out, sc, info, omit, hint)
	case info != nil && info.def.Kind == ast.Enum:
		return renderEnum(out, sc)
	default:
		raw, err := sc.skip()
		if err != nil {
			return nil, err
		}
		return append(out, raw...), nil
	}
}

// renderList renders the list at sc whose elements are of type elem
// (named type info), leaving out null elements; the elements share one
// hint of their members.
func (sh *Shim) renderList(out []byte, sc *scanner, elem *ast.Type, info *typeInfo) ([]byte, error) {
	if err := sc.expect('['); err != nil {
		return nil, err
	}
	out = append(out, '[')
	if sc.peek() == ']' {
		sc.pos++
		return append(out, ']'), nil
	}
	first := true
	elems := make([]memberHint, 0, 16)
	for {
		if !sc.isNull() {
			if !first {
				out = append(out, ',')
			}
			first = false
			var err error
			if out, err = sh.render(out, sc, elem, info, nil, &elems); err != nil {
				return nil, err
			}
		}
		end, err := sc.next(']')
		if err != nil {
			return nil, err
		}
		if end {
			return append(out, ']'), nil
		}
	}
}

// concrete returns the object type an interface value at sc renders as
// when the stored operation asked for __typename, so that members
// selected in fragments on that type are kept, else info. member looks
// ahead on a copy: the scanner stays where it is.
func (sh *Shim) concrete(sc *scanner, info *typeInfo) *typeInfo {
	tn, err := sc.member("__typename")
	if err != nil || tn == nil {
		return info
	}
	raw, err := tn.str()
	if err != nil {
		return info
	}
	if obj := sh.types[string(raw[1:len(raw)-1])]; obj != nil && obj.def.Kind == ast.Object {
		return obj
	}
	return info
}

// renderObject renders the object at sc of type info with snake_case
// member names, leaving out null members, __ members, members the schema
// does not know and those named in omit.
func (sh *Shim) renderObject(out []byte, sc *scanner, info *typeInfo, omit []string, hint *[]memberHint) ([]byte, error) {
	if err := sc.expect('{'); err != nil {
		return nil, err
	}
	out = append(out, '{')
	if sc.peek() == '}' {
		sc.pos++
		return append(out, '}'), nil
	}
	first := true
	for i := 0; ; i++ {
		k, err := sc.key()
		if err != nil {
			return nil, err
		}
		f := memberOf(info, k, hint, i)
		switch {
		case sc.isNull():
		case !kept(f, k, omit):
			if _, err := sc.skip(); err != nil {
				return nil, err
			}
		default:
			if !first {
				out = append(out, ',')
			}
			first = false
			out = append(out, '"')
			out = append(out, f.snake...)
			out = append(out, '"', ':')
			if out, err = sh.render(out, sc, f.typ, f.named, nil, nil); err != nil {
				return nil, err
			}
		}
		end, err := sc.next('}')
		if err != nil {
			return nil, err
		}
		if end {
			return append(out, '}'), nil
		}
	}
}

// renderEnum renders the enum value at sc lowercased.
func renderEnum(out []byte, sc *scanner) ([]byte, error) {
	raw, err := sc.str()
	if err != nil {
		return nil, err
	}
	for _, c := range raw {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out = append(out, c)
	}
	return out, nil
}

// next passes the separator after a list element or object member: a
// comma (end false) or the closing byte closer (end true); anything else
// is a syntax error.
func (s *scanner) next(closer byte) (end bool, err error) {
	switch s.peek() {
	case ',':
		s.pos++
		return false, nil
	case closer:
		s.pos++
		return true, nil
	default:
		return false, errSyntax
	}
}

// memberOf returns the field of info named k, the i-th member of its
// object (nil for an unknown name), asking hint first and keeping the
// answer there for the next element of the same list.
func memberOf(info *typeInfo, k []byte, hint *[]memberHint, i int) *fieldInfo {
	if hint == nil {
		return info.fields[string(k)]
	}
	h := *hint
	if i < len(h) && h[i].owner == info && h[i].f != nil && h[i].f.name == string(k) {
		return h[i].f
	}
	f := info.fields[string(k)]
	if i < len(h) {
		h[i] = memberHint{info, f}
	} else {
		*hint = append(h, memberHint{info, f})
	}
	return f
}

// kept reports whether member k (field f, nil when the schema does not
// know it) is rendered: not a __ member and not named in omit.
func kept(f *fieldInfo, k []byte, omit []string) bool {
	return f != nil && !(len(k) > 1 && k[0] == '_' && k[1] == '_') && !omitted(omit, k)
}

func omitted(omit []string, k []byte) bool {
	for _, o := range omit {
		if o == string(k) {
			return true
		}
	}
	return false
}
