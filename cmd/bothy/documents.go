package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"bothy.example.com/bothy/graph"
	"bothy.example.com/bothy/internal/trusteddocs"
)

const documentsUsage = `Usage: bothy documents hashes FILE|DIR...

Prints the trusted-documents file (graphql.trusted_documents) of a client's
operations: one line per operation, its SHA-256 in canonical form and its
name. FILE is a .graphql or .gql file of operations and fragments; a DIR is
searched for such files. Every operation is validated against this build's
schema; a fragment may be defined in another file than the operations that
use it.
`

// cmdDocuments runs "bothy documents hashes".
func cmdDocuments(args []string, stdout io.Writer) error {
	if len(args) >= 1 && isHelp(args[0]) {
		fmt.Fprint(stdout, documentsUsage)
		return nil
	}
	if len(args) < 2 || args[0] != "hashes" {
		return usageError{strings.TrimSpace(documentsUsage)}
	}
	files, err := documentFiles(args[1:])
	if err != nil {
		return err
	}
	sources := make([]*ast.Source, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		sources = append(sources, &ast.Source{Name: f, Input: string(b)})
	}
	ops, err := trusteddocs.Extract(graph.Schema(), sources)
	if err != nil {
		return err
	}
	if len(ops) == 0 {
		return errors.New("no operation found in " + strings.Join(args[1:], " "))
	}
	_, err = fmt.Fprintln(stdout, strings.Join(hashLines(ops), "\n"))
	return err
}

// documentFiles returns the files named by paths: a file as it is, a
// folder as the .graphql and .gql files below it.
func documentFiles(paths []string) ([]string, error) {
	var files []string
	for _, arg := range paths {
		st, err := os.Stat(arg)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, arg)
			continue
		}
		err = filepath.WalkDir(arg, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".graphql") || strings.HasSuffix(path, ".gql")) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// hashLines returns one line "HASH  NAME  SOURCE" per distinct operation
// of ops (the first of the same hash), sorted.
func hashLines(ops []trusteddocs.Operation) []string {
	seen := map[string]bool{}
	var lines []string
	for _, op := range ops {
		if seen[op.Hash] {
			continue
		}
		seen[op.Hash] = true
		name := op.Name
		if name == "" {
			name = "(anonymous)"
		}
		lines = append(lines, op.Hash+"  "+name+"  "+op.Source)
	}
	slices.Sort(lines)
	return lines
}
