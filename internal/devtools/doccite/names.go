package doccite

import (
	"regexp"
	"strings"
)

// RefKind says what a name in a page's inline code is taken to be.
type RefKind int

const (
	// RefPath is a repository path: the code span is one word whose first
	// folder is a top-level folder of the repository, or an import path
	// of the repository's module.
	RefPath RefKind = iota + 1
	// RefQualified is a Go name qualified by its package: pkg.Name,
	// pkg.Type.Member or pkg.(*Type).Method, where pkg is in lower case
	// and Name begins with a capital.
	RefQualified
	// RefMember is a Go field or method named by its type alone:
	// Type.Member, both beginning with a capital and Member not all
	// capitals (an enum value such as RunState.COMPLETED).
	RefMember
)

// Ref is one name a code span of a page names.
type Ref struct {
	Kind RefKind
	// Text is the name as cited.
	Text string
	// Parts are the identifiers of a Go name (package first for
	// RefQualified, the type first for RefMember); for a path, the path
	// without a leading ./, a trailing / or /... .
	Parts []string
}

// outside are the packages outside the repository that pages name
// (errors.Is in a Go snippet): a qualifier in lower case that is neither
// one of these nor a package of the repository is reported, because a
// package that was moved or removed is exactly such a qualifier.
var outside = map[string]bool{
	"errors": true, "strconv": true, "context": true, "time": true, "http": true,
	"slog": true, "testing": true, "pgx": true, "pgconn": true, "json": true, "sync": true,
}

// selector matches a dotted Go selector such as pkg.Type.Method or
// pkg.(*Type).Method.
var selector = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(?:\.(?:\(\*?[A-Za-z_][A-Za-z0-9_]*\)|[A-Za-z_][A-Za-z0-9_]*))+`)

// pathWord matches a code span that is one path-like word.
var pathWord = regexp.MustCompile(`^(?:\./)?[A-Za-z0-9_.-]+/[A-Za-z0-9_.*?/-]*$`)

// Recognise returns the repository paths and Go names that the text of
// one inline code span names. top holds the repository's top-level
// folders, module its Go module path ("" if none). The rule is small on
// purpose: a span is a path only when it is a single word starting with
// a top-level folder or the module path; a Go name needs a capital after
// the first dot, so configuration keys (files.max_bytes), event types
// (agent.invocation), GraphQL fields (Message.provenance) and enum values
// (Level.TRIGGER) are not names; routes and command lines contain spaces
// or start with a slash, so they are never paths.
func Recognise(span string, top map[string]bool, module string) []Ref {
	span = strings.TrimSpace(span)
	if p, ok := asPath(span, top, module); ok {
		return []Ref{{Kind: RefPath, Text: span, Parts: []string{p}}}
	}
	var refs []Ref
	for _, loc := range selector.FindAllStringIndex(span, -1) {
		if loc[0] > 0 && strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-:@$'\"", rune(span[loc[0]-1])) {
			continue // part of a longer word, a path, a host or a string
		}
		if loc[1] < len(span) && strings.ContainsRune("/-@", rune(span[loc[1]])) {
			continue // a host name or a path
		}
		if r, ok := goName(span[loc[0]:loc[1]]); ok {
			refs = append(refs, r)
		}
	}
	return refs
}

// asPath reports whether span is one repository path and returns it
// cleaned.
func asPath(span string, top map[string]bool, module string) (string, bool) {
	if module != "" && (span == module || strings.HasPrefix(span, module+"/")) {
		span = strings.TrimPrefix(strings.TrimPrefix(span, module), "/")
		if span == "" {
			return "", false
		}
		span += "/"
	}
	if !pathWord.MatchString(span) {
		return "", false
	}
	span = strings.TrimPrefix(span, "./")
	first, _, _ := strings.Cut(span, "/")
	if !top[first] {
		return "", false
	}
	span = strings.TrimSuffix(strings.TrimSuffix(span, "/..."), "/")
	return span, true
}

// goName classifies one dotted selector.
func goName(sel string) (Ref, bool) {
	var parts []string
	for _, p := range strings.Split(sel, ".") {
		parts = append(parts, strings.Trim(p, "(*)"))
	}
	first, second := parts[0], parts[1]
	switch {
	case !startsUpper(second):
		return Ref{}, false // a key, an event type, a GraphQL field, a file name
	case isLowerWord(first):
		if outside[first] {
			return Ref{}, false
		}
		if len(parts) > 3 {
			parts = parts[:3]
		}
		return Ref{Kind: RefQualified, Text: strings.Join(parts, "."), Parts: parts}, true
	case startsUpper(first) && !allCaps(second):
		return Ref{Kind: RefMember, Text: first + "." + second, Parts: []string{first, second}}, true
	}
	return Ref{}, false
}

func startsUpper(s string) bool { return s != "" && s[0] >= 'A' && s[0] <= 'Z' }

// isLowerWord reports whether s can be the name of a package of this
// repository: lower-case letters and digits, a letter first.
func isLowerWord(s string) bool {
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// allCaps reports whether s has no lower-case letter (TRIGGER,
// COMPLETED): a GraphQL enum value, not a Go member.
func allCaps(s string) bool { return strings.ToUpper(s) == s }
