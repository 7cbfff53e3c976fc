package db_test

import (
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// sqlExceptions are the packages (folders from the repository root) whose
// non-test files may hold SQL outside a store file, each with its reason.
// Test support (testSupport in ownership_test.go) is excepted as well.
var sqlExceptions = map[string]string{
	// The database package is the data-access layer itself: the pool, the
	// transaction and the migrator's own version table.
	"internal/platform/db": "the data-access layer itself",
	// `bothy` creates its database on the server before any module exists,
	// asking the server's catalog (pg_database), which no module owns.
	"cmd/bothy": "asks the server catalog before the database exists",
}

// sqlStart tells SQL from prose: a statement that starts with one of
// these keywords, written in capitals as Bothy writes SQL.
var sqlStart = regexp.MustCompile(`^(SELECT|INSERT|UPDATE|DELETE|WITH)\b`)

// isStoreFile reports whether a file's base name marks it as a store file:
// store.go, or store_<topic>.go for a package with much SQL.
func isStoreFile(name string) bool {
	return name == "store.go" || (strings.HasPrefix(name, "store_") && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go"))
}

// TestSQLOnlyInStoreFiles: a module's SQL lives in its store files, so a
// service file holds rules and calls the store (docs/DECISIONS.md, the data
// access convention). It fails on a string literal that starts like a
// statement, or a squirrel builder call on db.SQL, in any other non-test,
// non-generated Go file outside migrations, test support and
// sqlExceptions.
func TestSQLOnlyInStoreFiles(t *testing.T) {
	t.Parallel()
	for _, v := range sqlOutsideStores(t, moduletest.RepoRoot(t)) {
		t.Errorf("%s: SQL outside a store file (%s): move it to the package's store.go or store_<topic>.go", v.pos, v.what)
	}
}

// TestSQLOnlyInStoreFilesDetects keeps the detector honest: statements and
// builder calls outside a store file are found, the same in a store file,
// prose and format strings are not.
func TestSQLOnlyInStoreFilesDetects(t *testing.T) {
	t.Parallel()
	src := `package p
const a = "SELECT id FROM runs"
func f() {
	_ = ` + "`" + `
		WITH x AS (SELECT 1) SELECT * FROM x` + "`" + `
	_ = db.SQL.Insert("grants").Columns("x")
	_ = "  UPDATE runs SET state = $2"
	_ = "DELETE FROM tokens"
	_ = "INSERT INTO event_log"
	_ = "delete old tokens: %w"
	_ = "Select a thread to read"
	_ = "with a reason"
}
`
	dir := t.TempDir()
	pkg := filepath.Join(dir, "internal", "p")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"service.go", "store.go", "store_topic.go"} {
		if err := os.WriteFile(filepath.Join(pkg, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := sqlOutsideStores(t, dir)
	if len(got) != 6 {
		t.Fatalf("found %d uses, want 6 (all in service.go): %v", len(got), got)
	}
	for _, v := range got {
		if !strings.Contains(v.pos, "service.go") {
			t.Errorf("found %v in a store file", v)
		}
	}
}

// sqlUse is one piece of SQL outside a store file.
type sqlUse struct {
	pos, what string
}

// sqlOutsideStores finds the SQL (see TestSQLOnlyInStoreFiles) in the
// non-test, non-store Go files under root.
func sqlOutsideStores(t *testing.T, root string) []sqlUse {
	t.Helper()
	var uses []sqlUse
	skip := func(pkg, name string) bool {
		return isStoreFile(name) || sqlExceptions[pkg] != "" || slices.Contains(testSupport, pkg)
	}
	goSources(t, root, skip, func(_ string, f *ast.File, fset *token.FileSet) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CallExpr:
				if sel, ok := x.Fun.(*ast.SelectorExpr); ok && isDBSQL(sel.X) {
					uses = append(uses, sqlUse{pos: fset.Position(x.Pos()).String(), what: "db.SQL." + sel.Sel.Name})
				}
			case *ast.BasicLit:
				if x.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(x.Value)
				if err != nil {
					return true
				}
				if m := sqlStart.FindString(strings.TrimSpace(s)); m != "" {
					uses = append(uses, sqlUse{pos: fset.Position(x.Pos()).String(), what: "a literal starting with " + m})
				}
			}
			return true
		})
	})
	return uses
}

// isDBSQL reports whether e is the expression db.SQL, the squirrel
// statement builder of package db.
func isDBSQL(e ast.Expr) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "SQL" {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "db"
}
