package apicompat

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// Changelog is CHANGELOG.md read as its version sections: a section starts
// at a line "## NAME ..." where NAME is a released version (MAJOR.MINOR.PATCH)
// or anything else for the next version ("## Unreleased").
type Changelog struct {
	// Released are the released versions, newest first as written.
	Released []string
	// next holds the entries (bullets, continuation lines joined) of the
	// sections above the newest release.
	next []string
}

// ParseChangelog reads a changelog. It fails when the released versions
// are not written newest first, or when a version appears twice.
func ParseChangelog(text string) (*Changelog, error) {
	c := &Changelog{}
	sc := bufio.NewScanner(strings.NewReader(text))
	inNext := false
	seen := map[string]bool{}
	var entry *string
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "## "); ok {
			entry = nil
			v := strings.Fields(name)[0]
			if _, ok := parseVersion(v); !ok {
				inNext = len(c.Released) == 0
				continue
			}
			if seen[v] {
				return nil, fmt.Errorf("version %s appears twice", v)
			}
			if n := len(c.Released); n > 0 && !older(v, c.Released[n-1]) {
				return nil, fmt.Errorf("version %s is written below %s: newest first", v, c.Released[n-1])
			}
			seen[v] = true
			c.Released = append(c.Released, v)
			inNext = false
			continue
		}
		if !inNext {
			continue
		}
		switch trimmed := strings.TrimSpace(line); {
		case strings.HasPrefix(trimmed, "- ") || strings.HasPrefix(trimmed, "* "):
			c.next = append(c.next, trimmed[2:])
			entry = &c.next[len(c.next)-1]
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			entry = nil
		case entry != nil:
			*entry += " " + trimmed
		}
	}
	return c, sc.Err()
}

// Latest returns the newest released version ("" when none is).
func (c *Changelog) Latest() string {
	if len(c.Released) == 0 {
		return ""
	}
	return c.Released[0]
}

// Unlisted returns the breaks that no entry of the next version lists: an
// entry lists a break when it names its subject in backticks and carries a
// migration note (the word "Migration:").
func (c *Changelog) Unlisted(breaks []Break) []Break {
	var out []Break
	for _, b := range breaks {
		listed := false
		for _, e := range c.next {
			if strings.Contains(e, "`"+b.Subject+"`") && strings.Contains(e, "Migration:") {
				listed = true
				break
			}
		}
		if !listed {
			out = append(out, b)
		}
	}
	return out
}

// parseVersion reads MAJOR.MINOR.PATCH.
func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// older reports whether version a is older than version b (both valid).
func older(a, b string) bool {
	va, _ := parseVersion(a)
	vb, _ := parseVersion(b)
	for i := range va {
		if va[i] != vb[i] {
			return va[i] < vb[i]
		}
	}
	return false
}
