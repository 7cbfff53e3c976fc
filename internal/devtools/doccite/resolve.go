package doccite

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// codeSpan matches an inline code span of Markdown on one line.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// namesChecked reports whether the names in the code spans of page rel
// are checked: every README.md the walk reads (the root's, the SDKs', the
// deployment's, ...; the walk skips node_modules and testdata) and the
// pages under docs/, except docs/DECISIONS.md, which is history (each
// entry names the code of its day; it is append-only, so a later rename
// is a new entry, not an edit).
func namesChecked(rel string) bool {
	return path.Base(rel) == "README.md" ||
		strings.HasPrefix(rel, "docs/") && strings.HasSuffix(rel, ".md") && rel != "docs/DECISIONS.md"
}

// pendingRef is a name found while the tree is walked, checked once the
// walk has indexed every Go file.
type pendingRef struct {
	file string
	line int
	ref  Ref
}

// spans records the names of the code spans of one line of a checked page.
// A page below the root (deploy/kubernetes/README.md) also names paths
// relative to its own folder, as a reader in that folder types them: a
// span that is a path by the rule of Recognise with the page's subfolders
// (and "..") in place of the top-level folders names the path from the
// page's folder; any other span is read as on a page at the root.
func (c *checker) spans(rel string, n int, text string) {
	dir := path.Dir(rel)
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		if dir != "." {
			if refs := Recognise(m[1], c.folders(dir), ""); len(refs) == 1 && refs[0].Kind == RefPath {
				r := refs[0]
				r.Parts = []string{path.Join(dir, r.Parts[0])}
				c.pending = append(c.pending, pendingRef{file: rel, line: n, ref: r})
				continue
			}
		}
		for _, r := range Recognise(m[1], c.top, c.module) {
			c.pending = append(c.pending, pendingRef{file: rel, line: n, ref: r})
		}
	}
}

// folders returns the subfolders of the repository's folder dir, and "..",
// the first words a path relative to a page in dir may start with (read
// once per folder).
func (c *checker) folders(dir string) map[string]bool {
	if f, ok := c.local[dir]; ok {
		return f
	}
	f, err := topFolders(filepath.Join(c.root, filepath.FromSlash(dir)))
	if err != nil {
		f = map[string]bool{} // unreadable: the page names nothing relative to it
	}
	f[".."] = true
	c.local[dir] = f
	return f
}

// resolveNames reports every pending name the tree does not have.
func (c *checker) resolveNames() {
	for _, p := range c.pending {
		if why := c.resolveRef(p.ref); why != "" {
			c.problems = append(c.problems, Problem{File: p.file, Line: p.line, Cite: p.ref.Text, Why: why})
		}
	}
}

// resolveRef returns what is wrong with one name, or "".
func (c *checker) resolveRef(r Ref) string {
	switch r.Kind {
	case RefPath:
		return c.resolvePath(r.Parts[0])
	case RefQualified:
		pkg, name := r.Parts[0], r.Parts[1]
		if c.idx.names[pkg] == nil {
			return fmt.Sprintf("no Go package named %s in the repository", pkg)
		}
		if !c.idx.names[pkg][name] {
			return fmt.Sprintf("package %s declares no %s", pkg, name)
		}
		if len(r.Parts) < 3 {
			return ""
		}
		t := c.idx.types[pkg][name]
		if t == nil {
			return fmt.Sprintf("%s.%s is not a type", pkg, name)
		}
		if !c.idx.hasMember(t, r.Parts[2], 0) {
			return fmt.Sprintf("%s.%s has no field or method %s", pkg, name, r.Parts[2])
		}
	case RefMember:
		ts := c.idx.byTyp[r.Parts[0]]
		if len(ts) == 0 {
			return fmt.Sprintf("no Go type named %s in the repository", r.Parts[0])
		}
		for _, t := range ts {
			if c.idx.hasMember(t, r.Parts[1], 0) {
				return ""
			}
		}
		return fmt.Sprintf("no type %s in the repository has a field or method %s", r.Parts[0], r.Parts[1])
	}
	return ""
}

// resolvePath checks a repository path, which may be a glob.
func (c *checker) resolvePath(p string) string {
	if p == ".." || strings.HasPrefix(p, "../") {
		return "a path outside the repository"
	}
	if strings.ContainsAny(p, "*?") {
		if m, err := filepath.Glob(filepath.Join(c.root, p)); err == nil && len(m) > 0 {
			return ""
		}
		return "no file of the repository matches"
	}
	if _, err := os.Stat(filepath.Join(c.root, p)); err != nil {
		return "no such file or folder in the repository"
	}
	return ""
}

// topFolders returns the folders directly below root that the walk reads
// (the top-level folders when root is the repository's).
func topFolders(root string) (map[string]bool, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, err
	}
	top := map[string]bool{}
	for _, e := range entries {
		if e.IsDir() && !skipDir(e.Name()) {
			top[e.Name()] = true
		}
	}
	return top, nil
}

// modulePath returns the module path of root's go.mod, or "".
func modulePath(root string) string {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}
