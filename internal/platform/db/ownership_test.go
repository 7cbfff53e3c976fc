package db_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/moduletest"
)

// owners maps every table of migrations/ to the one package (its folder
// from the repository root) whose SQL may name it. Any other package asks
// the owner through a function. A new table needs a line here, or
// TestTableOwnership fails.
var owners = map[string]string{
	"principals":        "internal/identity",
	"groups":            "internal/identity",
	"group_members":     "internal/identity",
	"tokens":            "internal/identity",
	"spaces":            "internal/chat",
	"channels":          "internal/chat",
	"threads":           "internal/chat",
	"messages":          "internal/messaging",
	"message_mentions":  "internal/messaging",
	"grants":            "internal/authz",
	"audit_log":         "internal/authz",
	"event_log":         "internal/events",
	"retention_horizon": "internal/events",
	"agent_events":      "internal/events",
	"agent_sessions":    "internal/runs",
	"runs":              "internal/runs",
	"run_followups":     "internal/runs",
	"run_answers":       "internal/runs",
	"agent_cursors":     "internal/runs",
	"run_live":          "internal/runs",
	"run_live_ops":      "internal/runs",
	"run_approvals":     "internal/runs",
	"ratelimit_buckets": "internal/ratelimit",
	"schema_compat":     "internal/platform/db",
}

// testSupport are packages that only tests import: harnesses that set up
// and inspect the database of a test, like _test.go files, which the rule
// does not cover.
var testSupport = []string{"internal/apitest", "internal/moduletest", "internal/platform/pgtest"}

// TestTableOwnership: every table created in migrations/ has an owner, and
// no Go file outside the owning package (tests and test support excepted)
// names the table in SQL.
func TestTableOwnership(t *testing.T) {
	t.Parallel()
	root := moduletest.RepoRoot(t)
	tables := migrationTables(t, filepath.Join(root, "migrations"))
	for _, table := range tables {
		if owners[table] == "" {
			t.Errorf("table %s (migrations/) has no owning package: add it to owners in internal/platform/db/ownership_test.go", table)
		}
	}
	for table := range owners {
		if !slices.Contains(tables, table) {
			t.Errorf("owners names table %s that no migration creates", table)
		}
	}
	for _, v := range sqlTableUses(t, root, tables) {
		if owner := owners[v.table]; owner != "" && owner != v.pkg && !slices.Contains(testSupport, v.pkg) {
			t.Errorf("%s names table %s in SQL, which belongs to %s: call a function of %s instead", v.pos, v.table, owner, owner)
		}
	}
}

// TestTableOwnershipDetects keeps the detector honest: the SQL shapes that
// Bothy writes are found, and prose that merely contains a table's name is
// not.
func TestTableOwnershipDetects(t *testing.T) {
	t.Parallel()
	src := `package p
const a = "SELECT m.id FROM messages m JOIN threads t ON t.id = m.thread_id"
const b = ` + "`" + `INSERT INTO runs (id) VALUES ($1)` + "`" + `
func f() {
	sql.Insert("grants").Columns("x")
	sql.Select("id").From("channels c").LeftJoin("spaces s ON s.id = c.space_id")
	sql.Update("tokens").Set("runs", 1)
	sql.Delete("agent_cursors")
	_ = "the run answers in the thread; runs and messages are listed"
	_ = "DELETE FROM event_log WHERE seq IN (SELECT e.seq FROM event_log e, audit_log AS a, principals)"
	_ = "ON CONFLICT (stream) DO UPDATE SET seq = greatest(groups.seq, excluded.seq)"
	_ = "UPDATE buckets b SET tokens = b.tokens - 1, at = EXTRACT(EPOCH FROM (now() - b.at))"
}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tables := []string{"messages", "threads", "runs", "grants", "channels", "spaces", "tokens", "agent_cursors", "event_log", "audit_log", "groups", "principals"}
	var got []string
	for _, v := range sqlTableUses(t, dir, tables) {
		got = append(got, v.table)
	}
	sort.Strings(got)
	got = slices.Compact(got)
	want := []string{"agent_cursors", "audit_log", "channels", "event_log", "grants", "groups", "messages", "principals", "runs", "spaces", "threads", "tokens"}
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
}

// tableUse is one string literal of a package that names a table in SQL.
type tableUse struct {
	pkg, table, pos string
}

var (
	createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
	// tablePlace finds where SQL names tables: after FROM (a comma list
	// of tables with optional aliases), JOIN, INTO, UPDATE, TABLE and
	// TRUNCATE. Bothy writes SQL keywords in capitals, which tells SQL from
	// prose; a column that shares a table's name is not a table place.
	tablePlace = regexp.MustCompile(`\b(?:FROM|JOIN|INTO|UPDATE|TABLE|TRUNCATE)\s+(?:ONLY\s+)?(` + tableList + `)`)
	tableList  = `[a-z_][a-z0-9_]*(?:\s+(?:AS\s+)?[a-z_][a-z0-9_]*)?(?:\s*,\s*[a-z_][a-z0-9_]*(?:\s+(?:AS\s+)?[a-z_][a-z0-9_]*)?)*`
	// qualified finds table-qualified columns (retention_horizon.seq).
	qualified = regexp.MustCompile(`(?:^|[^.\w])([a-z_][a-z0-9_]*)\.[a-z_]`)
	// builderCalls are the squirrel methods whose argument starts with a
	// table name.
	builderCalls = []string{"Insert", "Into", "Update", "Delete", "From", "Join", "LeftJoin", "RightJoin", "InnerJoin", "CrossJoin", "FullJoin", "Replace"}
)

// migrationTables lists the tables the migrations in dir create.
func migrationTables(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in %s (%v)", dir, err)
	}
	var tables []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createTable.FindAllStringSubmatch(string(b), -1) {
			tables = append(tables, strings.ToLower(m[1]))
		}
	}
	return tables
}

// sqlTables lists the names that literal s uses as tables in SQL: after a
// table keyword, as a column's qualifier, or, for an argument of a squirrel
// builder method, as the first word.
func sqlTables(s string, builderArg bool) []string {
	var names []string
	if f := strings.Fields(s); builderArg && len(f) > 0 {
		names = append(names, f[0])
	}
	for _, m := range tablePlace.FindAllStringSubmatch(s, -1) {
		for _, item := range strings.Split(m[1], ",") {
			if f := strings.Fields(item); len(f) > 0 {
				names = append(names, f[0])
			}
		}
	}
	for _, m := range qualified.FindAllStringSubmatch(s, -1) {
		names = append(names, m[1])
	}
	return names
}

// sqlTableUses finds, in the non-test Go files under root (migrations and
// tool folders skipped), the string literals that name one of tables in
// SQL (see sqlTables).
func sqlTableUses(t *testing.T, root string, tables []string) []tableUse {
	t.Helper()
	var uses []tableUse
	goSources(t, root, func(string, string) bool { return false }, func(pkg string, f *ast.File, fset *token.FileSet) {
		builderArgs := map[*ast.BasicLit]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && slices.Contains(builderCalls, sel.Sel.Name) {
					for _, a := range call.Args {
						if lit, ok := a.(*ast.BasicLit); ok {
							builderArgs[lit] = true
						}
					}
				}
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, name := range slices.Compact(slices.Sorted(slices.Values(sqlTables(s, builderArgs[lit])))) {
				if slices.Contains(tables, name) {
					uses = append(uses, tableUse{pkg: pkg, table: name, pos: fset.Position(lit.Pos()).String()})
				}
			}
			return true
		})
	})
	return uses
}

// goSources parses every non-test, non-generated Go file under root
// (migrations and tool folders skipped) whose package folder pkg (relative
// to root) and file name skip does not refuse, and hands it to visit.
// Generated code holds no SQL of its own (gqlgen keeps the GraphQL schema
// text, where "runs" is a field).
func goSources(t *testing.T, root string, skip func(pkg, name string) bool, visit func(pkg string, f *ast.File, fset *token.FileSet)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "migrations", "node_modules", "testdata", "vendor", ".git":
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if skip(pkg, name) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ParseComments)
		if err != nil {
			return err
		}
		if !ast.IsGenerated(f) {
			visit(pkg, f, fset)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
