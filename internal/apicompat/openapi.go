package apicompat

import (
	"fmt"
	"sort"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/oasdiff/checker"
	"github.com/oasdiff/oasdiff/diff"
	"github.com/oasdiff/oasdiff/load"
)

// OpenAPIBreaks returns the changes from the OpenAPI document old to cur
// that oasdiff rates as errors (changes that break a client written
// against old: an operation, parameter, response or response property
// removed, a request made stricter, a type changed, ...), sorted by
// subject ("METHOD /path"). Warnings (changes that may break a client, such
// as a request parameter removed) are returned apart, for the log. It
// fails when a document does not load.
func OpenAPIBreaks(old, cur []byte) (breaks, warnings []Break, err error) {
	loader := openapi3.NewLoader()
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
	localize := checker.NewDefaultLocalizer()
	for _, c := range checker.CheckBackwardCompatibility(checker.NewConfig(checker.GetAllChecks()), d, sources) {
		b := Break{Face: "REST", Subject: c.GetOperation() + " " + c.GetPath(),
			Detail: c.GetUncolorizedText(localize) + " [" + c.GetId() + "]"}
		if c.GetOperation() == "" {
			b.Subject = c.GetPath()
		}
		switch c.GetLevel() {
		case checker.ERR:
			breaks = append(breaks, b)
		case checker.WARN:
			warnings = append(warnings, b)
		}
	}
	bySubject(breaks)
	bySubject(warnings)
	return breaks, warnings, nil
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
