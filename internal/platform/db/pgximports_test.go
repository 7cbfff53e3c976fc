package db_test

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// pgxExempt are the folders (from the repository root, with everything
// under them) whose non-test files may import pgx outside a store file:
// the data-access platform, which wraps pgx for everyone else, and the
// build and test tooling, which sets up and inspects test databases.
// internal/devtools and tools are where issue 48 moves the tooling.
var pgxExempt = []string{"internal/platform", "internal/devtools", "tools",
	"internal/devtools/apicompat", "internal/devtools/apilint", "internal/devtools/apitest", "internal/devtools/chaos", "internal/devtools/clientflow",
	"internal/devtools/doccite", "internal/devtools/gqlfloor", "internal/devtools/graphqlaudit", "internal/devtools/graphqlws",
	"internal/devtools/moduletest", "internal/devtools/ociimage", "internal/devtools/testbudget", "internal/devtools/testcluster", "internal/devtools/lint"}

// pgxExempted reports whether folder pkg is in or under a pgxExempt folder.
func pgxExempted(pkg string) bool {
	return slices.ContainsFunc(pgxExempt, func(e string) bool { return pkg == e || strings.HasPrefix(pkg, e+"/") })
}

// TestPgxOnlyInStoreFiles: pgx (github.com/jackc/pgx/...) is imported only
// by store files (store*.go), so that a service file neither tests pgx's
// errors nor scans rows: each store translates pgx.ErrNoRows and rows into
// its package's errors and values (issue 48). Test files and pgxExempt are
// not covered.
func TestPgxOnlyInStoreFiles(t *testing.T) {
	t.Parallel()
	for _, v := range pgxOutsideStores(t, moduletest.RepoRoot(t)) {
		t.Errorf("%s imports %s outside a store file: move the code that needs it to the package's store*.go, or use internal/platform/db's names", v.pos, v.what)
	}
}

// TestPgxOnlyInStoreFilesDetects keeps the detector honest: every pgx
// import outside a store file is found, none in a store file or an exempt
// folder.
func TestPgxOnlyInStoreFilesDetects(t *testing.T) {
	t.Parallel()
	src := `package p
import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgxlisten"
	"context"
)
`
	dir := t.TempDir()
	files := map[string]string{"internal/p/service.go": src, "internal/p/store.go": src, "internal/p/store_topic.go": src,
		"internal/platform/x/x.go": src, "internal/devtools/testcluster/x.go": src}
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := pgxOutsideStores(t, dir)
	if len(got) != 3 {
		t.Fatalf("found %d imports, want 3 (pgx, pgxpool and pgconn in service.go): %v", len(got), got)
	}
	for _, v := range got {
		if !strings.Contains(v.pos, "service.go") {
			t.Errorf("found %v outside internal/p/service.go", v)
		}
	}
}

// pgxOutsideStores finds the pgx imports of the non-test, non-store Go
// files under root outside pgxExempt.
func pgxOutsideStores(t *testing.T, root string) []sqlUse {
	t.Helper()
	var uses []sqlUse
	skip := func(pkg, name string) bool {
		return (strings.HasPrefix(name, "store") && strings.HasSuffix(name, ".go")) || pgxExempted(pkg)
	}
	goSources(t, root, skip, func(_ string, f *ast.File, fset *token.FileSet) {
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				continue
			}
			if path == "github.com/jackc/pgx" || strings.HasPrefix(path, "github.com/jackc/pgx/") {
				uses = append(uses, sqlUse{pos: fset.Position(imp.Pos()).String(), what: path})
			}
		}
	})
	return uses
}
