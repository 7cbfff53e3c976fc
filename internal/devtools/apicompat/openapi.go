package apicompat

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/oasdiff/checker"
	"github.com/oasdiff/oasdiff/diff"
	"github.com/oasdiff/oasdiff/load"
)

// schemaPrefix starts the subject of a break in a named schema: the $ref
// that names it in the document.
const schemaPrefix = "#/components/schemas/"

// OpenAPIBreaks returns the changes from the OpenAPI document old to cur
// that oasdiff rates as errors (changes that break a client written
// against old: an operation, parameter, response or response property
// removed, a request made stricter, a type changed, ...), with the removal
// of an optional response property raised from oasdiff's warning to an
// error: a client that reads the property breaks just as when it was
// required. Warnings (changes that may break a client, such as a request
// parameter removed) are returned apart, for the log. It fails when a
// document does not load.
//
// oasdiff reports each change once per operation whose request or response
// reaches it. A change inside a schema of components/schemas is one break
// whose subject is the schema ("#/components/schemas/Run"), its detail
// naming the operations; a change elsewhere has the operation as its
// subject ("METHOD /path"). Breaks are sorted by subject.
func OpenAPIBreaks(old, cur []byte) (breaks, warnings []Break, err error) {
	loader := openapi3.NewLoader()
	// The origins (lines) of the elements tell which schema a change is in.
	loader.IncludeOrigin = true
	base, err := load.NewSpecInfoFromData(loader, old, "released")
	if err != nil {
		return nil, nil, fmt.Errorf("load the released OpenAPI document: %w", err)
	}
	rev, err := load.NewSpecInfoFromData(loader, cur, "current")
	if err != nil {
		return nil, nil, fmt.Errorf("load the current OpenAPI document: %w", err)
	}
	d, sources, err := diff.GetPathsDiff(diff.NewConfig(), []*load.SpecInfo{base}, []*load.SpecInfo{rev})
	if err != nil {
		return nil, nil, fmt.Errorf("compare the OpenAPI documents: %w", err)
	}
	config := checker.NewConfig(checker.GetAllChecks(), checker.WithSeverityLevels(map[string]checker.Level{
		checker.ResponseOptionalPropertyRemovedId: checker.ERR,
	}))
	baseSchemas, revSchemas := schemaSpans(base.Spec), schemaSpans(rev.Spec)
	localize := checker.NewDefaultLocalizer()
	var errs, warns grouped
	for _, c := range checker.CheckBackwardCompatibility(config, d, sources) {
		op := c.GetOperation() + " " + c.GetPath()
		if c.GetOperation() == "" {
			op = c.GetPath()
		}
		subject, at := op, ""
		if s := c.GetBaseSource(); s != nil {
			subject, at = baseSchemas.subject(base.Spec, c, s.Line, op), fmt.Sprint("released:", s.Line)
		} else if s := c.GetRevisionSource(); s != nil {
			subject, at = revSchemas.subject(rev.Spec, c, s.Line, op), fmt.Sprint("current:", s.Line)
		}
		detail := c.GetUncolorizedText(localize) + " [" + c.GetId() + "]"
		// In a schema, one check at one place on one property is one
		// change, whatever the operation; its detail (the property's path
		// from the payload's root) differs from operation to operation. The
		// property's name tells apart two that name one schema (two
		// timestamps), which are located at that schema.
		key := detail
		if subject != op {
			key = c.GetId() + " " + at + " " + propertyName(c)
		}
		switch c.GetLevel() {
		case checker.ERR:
			errs.add(subject, op, key, detail)
		case checker.WARN:
			warns.add(subject, op, key, detail)
		default:
			// INFO and the rest are notes, not breaks.
		}
	}
	return errs.breaks(), warns.breaks(), nil
}

// span is the lines of a named schema in a document.
type span struct {
	name        string
	first, last int
}

// spans are the named schemas of a document.
type spans []span

// schemaSpans returns the lines of each schema of doc's components/schemas.
func schemaSpans(doc *openapi3.T) spans {
	var out spans
	if doc == nil || doc.Components == nil {
		return out
	}
	for name, ref := range doc.Components.Schemas {
		if ref == nil || ref.Value == nil || ref.Value.Origin == nil || ref.Value.Origin.Key == nil {
			continue
		}
		k := ref.Value.Origin.Key
		out = append(out, span{name, k.Line, k.EndLine})
	}
	return out
}

// subject names the schema of doc whose body holds line, where change c
// is located, or gives op when none does. A change located on the first
// line of a schema is that schema as a whole standing for a property (a
// $ref): its subject is the schema that holds the property, found by the
// property's path from the payload, or op when the payload's own
// (inline) schema holds it.
func (ss spans) subject(doc *openapi3.T, c checker.Change, line int, op string) string {
	for _, s := range ss {
		if s.first < line && line <= s.last {
			return schemaPrefix + s.name
		}
	}
	for _, s := range ss {
		if s.first == line {
			if owner := propertyOwner(doc, c); owner != "" {
				return schemaPrefix + owner
			}
		}
	}
	return op
}

// propertyName returns the last name of change c's property path (its
// first argument), "" when it has none.
func propertyName(c checker.Change) string {
	if args := c.GetArgs(); len(args) > 0 {
		if path, ok := args[0].(string); ok {
			segs := pathSegments(path)
			return segs[len(segs)-1]
		}
	}
	return ""
}

// propertyOwner returns the named schema that holds the property of
// change c (its first argument, a path from the payload's root as oasdiff
// writes it: "items/items/started_at"), walked from the payloads of c's
// operation in doc; "" when the path is not a property's, does not lead
// through doc, or the property is the payload's own.
func propertyOwner(doc *openapi3.T, c checker.Change) string {
	args := c.GetArgs()
	if len(args) == 0 || doc == nil || doc.Paths == nil {
		return ""
	}
	path, ok := args[0].(string)
	item := doc.Paths.Value(c.GetPath())
	if !ok || path == "" || item == nil {
		return ""
	}
	op := item.GetOperation(c.GetOperation())
	if op == nil {
		return ""
	}
	segs := pathSegments(path)
	for _, p := range payloadsOf(op) {
		if owner, ok := walkOwner(p, segs[:len(segs)-1], segs[len(segs)-1], ""); ok {
			return owner
		}
	}
	return ""
}

// payloadsOf returns the schemas of op's payloads: its request body's, then
// its responses', in every media type.
func payloadsOf(op *openapi3.Operation) []*openapi3.SchemaRef {
	var payloads []*openapi3.SchemaRef
	if op.RequestBody != nil && op.RequestBody.Value != nil {
		for _, mt := range op.RequestBody.Value.Content {
			payloads = append(payloads, mt.Schema)
		}
	}
	if op.Responses != nil {
		for _, r := range op.Responses.Map() {
			if r.Value != nil {
				for _, mt := range r.Value.Content {
					payloads = append(payloads, mt.Schema)
				}
			}
		}
	}
	return payloads
}

// walkOwner follows segs from ref and, when the schema reached has the
// property last, returns the named schema it belongs to: the last $ref to
// components/schemas on the way (owner so far), "" for an inline one.
func walkOwner(ref *openapi3.SchemaRef, segs []string, last, owner string) (string, bool) {
	if ref == nil || ref.Value == nil {
		return "", false
	}
	if name, ok := strings.CutPrefix(ref.Ref, schemaPrefix); ok {
		owner = name
	}
	s := ref.Value
	if len(segs) == 0 {
		_, ok := s.Properties[last]
		return owner, ok
	}
	seg, rest := segs[0], segs[1:]
	switch {
	case seg == "items" && s.Items != nil:
		return walkOwner(s.Items, rest, last, owner)
	case seg == "additionalProperties" && s.AdditionalProperties.Schema != nil:
		return walkOwner(s.AdditionalProperties.Schema, rest, last, owner)
	case strings.HasSuffix(seg, "]"):
		kind, label, _ := strings.Cut(strings.TrimSuffix(seg, "]"), "[")
		list := map[string]openapi3.SchemaRefs{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf}[kind]
		if i := subschema(list, label); i >= 0 {
			return walkOwner(list[i], rest, last, owner)
		}
		return "", false
	}
	return walkOwner(s.Properties[seg], rest, last, owner)
}

// subschema returns the index in list of the subschema that oasdiff's
// label names ("#/components/schemas/Run", "subschema #2", "subschema #2:
// Title", either side of "A -> B" for one that changed), or -1.
func subschema(list openapi3.SchemaRefs, label string) int {
	for _, name := range strings.Split(label, " -> ") {
		for i, sub := range list {
			n := fmt.Sprintf("subschema #%d", i+1)
			if sub.Ref != "" && name == sub.Ref || name == n || strings.HasPrefix(name, n+": ") {
				return i
			}
		}
	}
	return -1
}

// pathSegments splits a path as oasdiff writes it at its slashes, except
// those inside brackets ("oneOf[#/components/schemas/Run]").
func pathSegments(path string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range path {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case '/':
			if depth == 0 {
				out = append(out, path[start:i])
				start = i + 1
			}
		}
	}
	return append(out, path[start:])
}

// grouped collects the changes by subject, each change once with the
// operations it was reported for.
type grouped struct {
	subjects map[string]map[string]*change
}

// change is one change of a subject: its first detail and its operations.
type change struct {
	detail string
	ops    []string
}

// add records the change key of subject, reported for op with detail; the
// first detail of a key stands for all.
func (g *grouped) add(subject, op, key, detail string) {
	if g.subjects == nil {
		g.subjects = map[string]map[string]*change{}
	}
	if g.subjects[subject] == nil {
		g.subjects[subject] = map[string]*change{}
	}
	c := g.subjects[subject][key]
	if c == nil {
		c = &change{detail: detail}
		g.subjects[subject][key] = c
	}
	c.ops = append(c.ops, op)
}

// breaks returns one Break per subject, sorted by subject. A schema's
// break lists its changes and, for each, the operations that reach it.
func (g *grouped) breaks() []Break {
	var out []Break
	for subject, changes := range g.subjects {
		var details []string
		for _, c := range changes {
			d := c.detail
			if strings.HasPrefix(subject, schemaPrefix) {
				// A payload may reach the schema more than once.
				slices.Sort(c.ops)
				d += " (in " + strings.Join(slices.Compact(c.ops), ", ") + ")"
			}
			details = append(details, d)
		}
		sort.Strings(details)
		out = append(out, Break{Face: "REST", Subject: subject, Detail: strings.Join(details, "; ")})
	}
	bySubject(out)
	return out
}

// bySubject sorts bs by subject, then detail.
func bySubject(bs []Break) {
	sort.Slice(bs, func(i, j int) bool {
		if bs[i].Subject != bs[j].Subject {
			return bs[i].Subject < bs[j].Subject
		}
		return bs[i].Detail < bs[j].Detail
	})
}
