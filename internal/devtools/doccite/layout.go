package doccite

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// layoutMarker, on the line before a fenced block of a page, makes the
// block a layout of the repository: each line at indent 0 names a path
// from the root (cmd/bothy, internal/), each line at indent 2 a path
// under the last such one (identity, platform/..., bench/injection),
// deeper lines continue a description, and a line starting with # (after
// its indent) heads a group. Check then fails on a path the
// tree does not have, on a top-level folder the layout leaves out, and on
// a folder left out beside folders the layout lists (every folder of
// internal/ when the layout lists folders of internal/).
const layoutMarker = "<!-- layout"

// layoutBlock is the text of one marked block.
type layoutBlock struct {
	file  string
	line  int // of the marker
	start int // of the block's first line
	lines []string
}

// layoutScan follows one page for a layout marker and the block after it.
type layoutScan struct{ cur *layoutBlock }

// layoutLine takes line n of page rel; fence says whether the line opens
// or closes a fenced block, fenced whether a block is open after it.
func (c *checker) layoutLine(s *layoutScan, rel string, n int, text string, fence, fenced bool) {
	switch {
	case s.cur == nil:
		if !fenced && strings.HasPrefix(strings.TrimSpace(text), layoutMarker) {
			s.cur = &layoutBlock{file: rel, line: n}
		}
	case fence && fenced: // the block opens
		s.cur.start = n + 1
	case fence: // the block closes
		c.layouts = append(c.layouts, *s.cur)
		s.cur = nil
	case s.cur.start > 0:
		s.cur.lines = append(s.cur.lines, text)
	case strings.TrimSpace(text) != "":
		s.cur = nil // the marker must come right before its block
	}
}

// checkLayout reports what one layout block gets wrong.
func (c *checker) checkLayout(b layoutBlock) {
	add := func(line int, cite, why string) {
		c.problems = append(c.problems, Problem{File: b.file, Line: line, Cite: cite, Why: why})
	}
	var listed []string
	parent := ""
	for i, text := range b.lines {
		indent := len(text) - len(strings.TrimLeft(text, " "))
		fields := strings.Fields(text)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimSuffix(fields[0], "/..."), "/")
		switch {
		case indent == 0:
			parent = name
		case indent == 2 && parent != "":
			name = parent + "/" + name
		default:
			continue
		}
		listed = append(listed, name)
		if _, err := os.Stat(filepath.Join(c.root, name)); err != nil {
			add(b.start+i, name, "the layout names a path the repository does not have")
		}
	}
	for _, missing := range unlisted(c.root, c.top, listed) {
		add(b.line, missing, "a folder of the repository the layout does not name")
	}
}

// unlisted returns the folders a layout must name and does not: every
// top-level folder, and every folder beside one it names below a named
// folder.
func unlisted(root string, top map[string]bool, listed []string) []string {
	covered := func(dir string) bool {
		return slices.ContainsFunc(listed, func(p string) bool { return p == dir || strings.HasPrefix(p, dir+"/") })
	}
	var out []string
	for d := range top {
		if !covered(d) {
			out = append(out, d)
		}
	}
	for _, p := range listed {
		if !slices.ContainsFunc(listed, func(q string) bool { return strings.HasPrefix(q, p+"/") }) {
			continue // the layout lists nothing below p, so it need not list everything
		}
		entries, err := os.ReadDir(filepath.Join(root, p))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if d := p + "/" + e.Name(); e.IsDir() && !skipDir(e.Name()) && !covered(d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}
