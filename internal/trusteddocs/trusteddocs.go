// Package trusteddocs is the allow-list of GraphQL operations a production
// instance runs (graphql.trusted_documents): a file of hashes, each the
// SHA-256 of one operation in canonical form, and the rule that refuses any
// other operation before it runs.
//
// The hash is taken over the operation a request runs, not over the bytes a
// client sent: the operation with the fragments it uses, printed compactly by
// gqlparser's formatter (Canonical). White space, comments, the order of
// fragments and the other operations of a document do not change it, so the
// hashes that `bothy documents hashes` computes from a client's operation
// files match whatever layout the client sends them in.
package trusteddocs

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
)

// Canonical returns op of doc as a document of its own: the operation, then
// the fragments it uses (directly or through other fragments) in name
// order, printed by gqlparser's compact formatter without comments. It is
// what Hash hashes.
func Canonical(doc *ast.QueryDocument, op *ast.OperationDefinition) string {
	used := map[string]*ast.FragmentDefinition{}
	var walk func(ast.SelectionSet)
	walk = func(set ast.SelectionSet) {
		for _, sel := range set {
			switch s := sel.(type) {
			case *ast.Field:
				walk(s.SelectionSet)
			case *ast.InlineFragment:
				walk(s.SelectionSet)
			case *ast.FragmentSpread:
				if _, seen := used[s.Name]; seen {
					continue
				}
				f := doc.Fragments.ForName(s.Name)
				used[s.Name] = f
				if f != nil {
					walk(f.SelectionSet)
				}
			}
		}
	}
	walk(op.SelectionSet)
	one := &ast.QueryDocument{Operations: ast.OperationList{op}}
	for _, name := range slices.Sorted(maps.Keys(used)) {
		if f := used[name]; f != nil {
			one.Fragments = append(one.Fragments, f)
		}
	}
	var b bytes.Buffer
	formatter.NewFormatter(&b, formatter.WithCompacted()).FormatQueryDocument(one)
	return b.String()
}

// Hash returns the hexadecimal SHA-256 of op's canonical form (Canonical):
// the name of the operation in a trusted-documents file.
func Hash(doc *ast.QueryDocument, op *ast.OperationDefinition) string {
	sum := sha256.Sum256([]byte(Canonical(doc, op)))
	return hex.EncodeToString(sum[:])
}

// Set is a set of trusted operation hashes.
type Set map[string]struct{}

// Has reports whether hash is in the set.
func (s Set) Has(hash string) bool {
	_, ok := s[hash]
	return ok
}

// Load reads a trusted-documents file (Parse) from path.
//
// Errors: the file cannot be read, or a line is malformed (Parse).
func Load(path string) (Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("graphql.trusted_documents: %w", err)
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("graphql.trusted_documents %s: %w", path, err)
	}
	return s, nil
}

// Parse reads a trusted-documents file: one hash per line, 64 lowercase
// hexadecimal digits, optionally followed by white space and anything (the
// operation's name, as `bothy documents hashes` writes it); empty lines and
// lines starting with "#" are skipped.
//
// Errors: a line whose first word is not such a hash (with its number), or
// a read error.
func Parse(r io.Reader) (Set, error) {
	s := Set{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word := strings.Fields(line)[0]
		if !IsHash(word) {
			return nil, fmt.Errorf("line %d: want a SHA-256 in 64 lowercase hexadecimal digits", n)
		}
		s[word] = struct{}{}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

// IsHash reports whether s is 64 lowercase hexadecimal digits.
func IsHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
