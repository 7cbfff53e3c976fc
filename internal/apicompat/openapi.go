package apicompat

import (
	"fmt"
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
			subject, at = baseSchemas.subject(s.Line, op), fmt.Sprint("released:", s.Line)
		} else if s := c.GetRevisionSource(); s != nil {
			subject, at = revSchemas.subject(s.Line, op), fmt.Sprint("current:", s.Line)
		}
		detail := c.GetUncolorizedText(localize) + " [" + c.GetId() + "]"
		// In a schema, one check at one place is one change, whatever the
		// operation; its detail (a property's path from the payload's root)
		// differs from operation to operation.
		key := detail
		if subject != op {
			key = c.GetId() + " " + at
		}
		switch c.GetLevel() {
		case checker.ERR:
			errs.add(subject, op, key, detail)
		case checker.WARN:
			warns.add(subject, op, key, detail)
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

// subject names the schema whose body holds line, or gives op when none
// does. The first line of a schema is not its body: a change located
// there is the schema as a whole taking the place of a property or a
// payload (a $ref), which is the referring operation's change.
func (ss spans) subject(line int, op string) string {
	for _, s := range ss {
		if s.first < line && line <= s.last {
			return schemaPrefix + s.name
		}
	}
	return op
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
				sort.Strings(c.ops)
				d += " (in " + strings.Join(c.ops, ", ") + ")"
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
