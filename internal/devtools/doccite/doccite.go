// Package doccite checks that the repository cites only documents it has.
// Comments and pages point a reader at the rules they follow (for example
// docs/design/trust.md#fail-closed); a citation of a page or heading that
// is not in the repository, or of the outside specification the code was
// first written from, leaves a newcomer with nothing to read. Check scans
// the comments of every Go file and the text of every Markdown page,
// GraphQL schema, SQL migration and the OpenAPI document, and reports each
// citation that does not resolve.
//
// Every README.md (the root's and those below it, outside node_modules and
// testdata) and the pages under docs/ (not docs/DECISIONS.md, which is
// history) are held to the code as well: every repository path and Go
// name in their inline code (Recognise says which spans those are; a page
// below the root names paths from its own folder too) must exist in the
// tree, and a layout block marked with <!-- layout --> must name the
// folders the tree has (checkLayout). The Go names come from the
// declarations of the files the comment check parses anyway, so the check
// costs one parse of the tree and caches nothing across runs.
package doccite

import (
	"bufio"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Problem is one citation that does not resolve.
type Problem struct {
	// File is the path of the citing file relative to the root, Line its
	// line (1-based).
	File string
	Line int
	// Cite is the text that was cited, Why what is wrong with it.
	Cite, Why string
}

// String renders p as file:line: cite: why.
func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Cite, p.Why) }

// foreign are citations of documents that live outside the repository: the
// specification's pages, its ticket names and its rule labels. A newcomer
// cannot follow any of them; the rules are restated under docs/design/.
var foreign = []struct {
	re  *regexp.Regexp
	why string
}{
	{regexp.MustCompile(`\b(?:domain|api|world|config)\.md\b`), "a page of the outside specification; cite docs/design/, docs/api/openapi.yaml or docs/configuration.md"},
	{regexp.MustCompile(`\bspec (?:domain|api|world|config)\b`), "a page of the outside specification; cite docs/design/"},
	{regexp.MustCompile(`\bM\d+-\d+\b`), "a ticket name of the outside specification; cite docs/design/"},
	{regexp.MustCompile(`\bseed (?:M|note|ticket)`), "a seed ticket of the outside specification; cite docs/design/"},
	{regexp.MustCompile(`\bSEC-[A-Z]+-\d+\b`), "a security label of the outside specification; cite docs/design/"},
	{regexp.MustCompile(`\bSR\d+\b`), "a rule label of the outside specification; cite docs/design/"},
	{regexp.MustCompile(`\b(?:AG|AZ|AZ-[A-Z]|R-[A-Z]{2}|T-AI)-\d+\b`), "a requirement label of the outside specification; cite docs/design/"},
}

// decisionLabel matches the ids of rulings in docs/DECISIONS.md (for
// example D-M2-13-4): names of entries of a page the repository has, not
// citations of another document.
var decisionLabel = regexp.MustCompile(`\bD-M\d+-\d+-[0-9a-z]+\b`)

// url matches a web address, whose path is not a file of the repository.
var url = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s)>\]"'` + "`" + `]+`)

// mdLink matches the target of a Markdown link or image.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// pathCite matches a cited Markdown page (with an optional anchor) or any
// path under docs/: the citations that must name files of the repository.
var pathCite = regexp.MustCompile(`(?:\.\.?/)*(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*\.md(?:#[A-Za-z0-9_-]+)?\b|\bdocs/[A-Za-z0-9_./-]*[A-Za-z0-9_](?:#[A-Za-z0-9_-]+)?`)

// skipDir reports whether a directory is outside the repository's own
// text: version control, installed npm packages, build output, local data,
// and folders the go tool ignores ("_" first: tests make scratch modules
// there while other tests run).
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "node_modules" || name == "bin" || name == "dist" || name == "testdata"
}

// Check scans the repository at root and returns every citation that does
// not resolve, ordered by file and line.
func Check(root string) ([]Problem, error) {
	top, err := topFolders(root)
	if err != nil {
		return nil, err
	}
	c := &checker{root: root, anchors: map[string][]string{}, idx: newGoIndex(), top: top, module: modulePath(root), local: map[string]map[string]bool{}}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while the walk ran: another test's scratch file
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case strings.HasSuffix(rel, ".go"):
			err = c.goFile(rel)
		case strings.HasSuffix(rel, ".md"), strings.HasSuffix(rel, ".graphqls"), strings.HasSuffix(rel, ".sql"), rel == "docs/api/openapi.yaml":
			err = c.textFile(rel)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	c.resolveNames()
	for _, b := range c.layouts {
		c.checkLayout(b)
	}
	return sorted(c.problems), nil
}

// sorted orders problems by file and line and drops repeats (a path in a
// code span is both a citation and a name).
func sorted(ps []Problem) []Problem {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		if a.File != b.File {
			return strings.Compare(a.File, b.File)
		}
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return strings.Compare(a.Cite, b.Cite)
	})
	return slices.CompactFunc(ps, func(a, b Problem) bool {
		return a.File == b.File && a.Line == b.Line && a.Cite == b.Cite
	})
}

type checker struct {
	root     string
	anchors  map[string][]string
	problems []Problem
	// idx, top and module serve the check of the names of pages: the Go
	// declarations, the top-level folders and the module path.
	idx     *goIndex
	top     map[string]bool
	module  string
	pending []pendingRef
	layouts []layoutBlock
	// local caches the subfolders of the folders of pages below the root
	// (checker.folders).
	local map[string]map[string]bool
}

// goFile checks the comments of a Go file; code and string literals are
// not citations.
func (c *checker) goFile(rel string) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(c.root, rel), nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(rel, "_test.go") {
		c.idx.add(f)
	}
	for _, g := range f.Comments {
		for _, cm := range g.List {
			line := fset.Position(cm.Pos()).Line
			for i, text := range strings.Split(cm.Text, "\n") {
				c.line(rel, line+i, text, false, true)
			}
		}
	}
	return nil
}

// textFile checks every line of a page, schema, migration or the OpenAPI
// document.
func (c *checker) textFile(rel string) error {
	b, err := os.ReadFile(filepath.Join(c.root, rel))
	if err != nil {
		return err
	}
	md := strings.HasSuffix(rel, ".md")
	names := md && namesChecked(rel)
	fenced := false
	var layout layoutScan
	for i, text := range strings.Split(string(b), "\n") {
		fence := md && strings.HasPrefix(strings.TrimSpace(text), "```")
		if fence {
			fenced = !fenced
		}
		if md {
			c.layoutLine(&layout, rel, i+1, text, fence, fenced)
		}
		c.line(rel, i+1, text, md, !fenced)
		if names && !fenced {
			c.spans(rel, i+1, text)
		}
	}
	return nil
}

// line checks one line of text of file rel; md says whether Markdown link
// syntax applies, paths whether bare paths are citations (not inside a
// fenced code block of a page, where commands and layouts show paths
// without citing them; the outside specification is cited nowhere).
func (c *checker) line(rel string, n int, text string, md, paths bool) {
	add := func(cite, why string) {
		c.problems = append(c.problems, Problem{File: rel, Line: n, Cite: cite, Why: why})
	}
	text = decisionLabel.ReplaceAllString(text, "")
	for _, f := range foreign {
		for _, m := range f.re.FindAllString(text, -1) {
			add(m, f.why)
		}
	}
	// A foreign citation is reported once, not again as a missing file.
	for _, f := range foreign {
		text = f.re.ReplaceAllString(text, " ")
	}
	if !paths {
		return
	}
	text = url.ReplaceAllString(text, "")
	if md {
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.HasPrefix(target, "mailto:") {
				continue
			}
			if why := c.resolve(rel, target, true); why != "" {
				add(target, why)
			}
		}
		text = mdLink.ReplaceAllString(text, "]")
	}
	for _, m := range pathCite.FindAllString(text, -1) {
		m = strings.TrimRight(m, ".")
		if why := c.resolve(rel, m, false); why != "" {
			add(m, why)
		}
	}
}

// resolve checks that target (a path with an optional #anchor, or an
// anchor alone in a Markdown link) names a file of the repository and, for
// a Markdown page, one of its headings. A path resolves against the citing
// file's folder or the root; a Markdown link only against the folder, as a
// browser would. It returns what is wrong, or "".
func (c *checker) resolve(rel, target string, link bool) string {
	path, anchor, _ := strings.Cut(target, "#")
	var file string
	if path == "" {
		file = rel
	} else {
		candidates := []string{filepath.ToSlash(filepath.Join(filepath.Dir(rel), path))}
		if !link {
			candidates = append(candidates, filepath.ToSlash(filepath.Clean(path)))
		}
		for _, cand := range candidates {
			if strings.HasPrefix(cand, "../") {
				continue
			}
			if _, err := os.Stat(filepath.Join(c.root, cand)); err == nil {
				file = cand
				break
			}
		}
		if file == "" {
			return "no such file in the repository"
		}
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(file, ".md") {
		return "an anchor into a file that is not a Markdown page"
	}
	anchors, err := c.anchorsOf(file)
	if err != nil {
		return "unreadable: " + err.Error()
	}
	if !slices.Contains(anchors, anchor) {
		return fmt.Sprintf("%s has no heading with anchor #%s", file, anchor)
	}
	return ""
}

// anchorsOf returns the heading anchors of the Markdown page file (cached).
func (c *checker) anchorsOf(file string) ([]string, error) {
	if a, ok := c.anchors[file]; ok {
		return a, nil
	}
	f, err := os.Open(filepath.Join(c.root, file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	a, err := Anchors(f)
	if err != nil {
		return nil, err
	}
	c.anchors[file] = a
	return a, nil
}

// headingWord drops what a heading anchor leaves out: everything but
// letters, digits, spaces, hyphens and underscores.
var headingWord = regexp.MustCompile(`[^\p{L}\p{N} _-]`)

// Anchors returns the anchors of the headings of a Markdown page the way
// GitHub renders them: the heading text in lower case without punctuation,
// spaces turned into hyphens, a repeated anchor numbered -1, -2, ...
// Lines inside fenced code blocks are not headings.
func Anchors(r io.Reader) ([]string, error) {
	var out []string
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimLeft(line, "#")
		if !strings.HasPrefix(title, " ") {
			continue
		}
		a := strings.ReplaceAll(headingWord.ReplaceAllString(strings.ToLower(strings.TrimSpace(title)), ""), " ", "-")
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out, sc.Err()
}
