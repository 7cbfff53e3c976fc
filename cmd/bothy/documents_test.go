package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"bothy.example.com/bothy/internal/trusteddocs"
)

// TestDocumentsHashes: bothy documents hashes prints a line per operation
// of the .graphql files of a folder, fragments from any file, each line
// the hash the server computes for that operation; the output is a
// trusted-documents file. An operation that does not validate fails the
// command with its file and name.
func TestDocumentsHashes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("me.graphql", "query Me {\n  viewer { ...Who }\n}\n")
	write("fragments.gql", "fragment Who on Principal { handle }\n")
	write("notes.txt", "query Ignored { viewer { id } }")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"documents", "hashes", dir}, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	doc, _ := parser.ParseQuery(&ast.Source{Input: `query Me { viewer { ...Who } } fragment Who on Principal { handle }`})
	want := trusteddocs.Hash(doc, doc.Operations[0])
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], want+"  Me  ") {
		t.Fatalf("output %q, want one line for Me with %s", out.String(), want)
	}
	set, err := trusteddocs.Parse(strings.NewReader(out.String()))
	if err != nil || !set.Has(want) {
		t.Fatalf("the output is no trusted-documents file: %v", err)
	}
	write("bad.graphql", "query Bad { viewer { shoeSize } }")
	out.Reset()
	err = run(context.Background(), []string{"documents", "hashes", dir}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "bad.graphql") || !strings.Contains(err.Error(), `"Bad"`) {
		t.Fatalf("invalid operation: err %v", err)
	}
}
