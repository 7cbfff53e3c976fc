package db_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
)

// owners maps every table, view and function of migrations/ to the one
// package (its folder from the repository root) whose SQL may name it, and
// whose migration comment says so. Any other package asks the owner
// through a function, or reads one of the owner's shared views or
// functions (shared). A new table, view or function needs a line here, or
// TestTableOwnership fails.
var owners = map[string]string{
	"principals":           "internal/identity",
	"groups":               "internal/identity",
	"group_members":        "internal/identity",
	"tokens":               "internal/identity",
	"principal_identities": "internal/identity",
	"signin_attempts":      "internal/signin",
	"signin_refresh":       "internal/signin",
	"spaces":               "internal/chat",
	"channels":             "internal/chat",
	"threads":              "internal/chat",
	"messages":             "internal/messaging",
	"message_mentions":     "internal/messaging",
	"grants":               "internal/authz",
	"audit_log":            "internal/authz",
	"event_log":            "internal/events",
	"retention_horizon":    "internal/events",
	"agent_events":         "internal/events",
	"agent_sessions":       "internal/runs",
	"runs":                 "internal/runs",
	"run_followups":        "internal/runs",
	"run_answers":          "internal/runs",
	"agent_cursors":        "internal/runs/stream",
	"run_live":             "internal/runs",
	"run_live_ops":         "internal/runs",
	"run_approvals":        "internal/runs/approvals",
	"ratelimit_buckets":    "internal/ratelimit",
	"schema_compat":        "internal/platform/db",
	"stored_files":         "internal/files",
	// Views and functions (migrations 00012 and 00015).
	"active_runs":       "internal/runs",
	"ended_runs":        "internal/runs",
	"principal_facts":   "internal/identity",
	"group_memberships": "internal/identity",
	"thread_places":     "internal/chat",
	"thread_info":       "internal/chat",
	"message_facts":     "internal/messaging",
	"agent_event_facts": "internal/events",
	"grant_levels":      "internal/authz",
	"context_authors":   "internal/messaging",
}

// shared are the views and functions that modules other than their owner
// (in owners) may read: module boundaries in the schema, whose columns the owner's own tests read from rows they wrote
// (TestPrincipalFacts and the groups test of internal/identity,
// TestSharedThreadViews, TestMessageFacts, TestAgentEventFacts,
// TestSharedRunViews, TestGrantLevels, TestContextWindow for
// context_authors). A table is never shared: its owner
// shares a view or function of it instead.
var shared = map[string]bool{
	"active_runs":       true,
	"ended_runs":        true,
	"principal_facts":   true,
	"group_memberships": true,
	"thread_places":     true,
	"thread_info":       true,
	"message_facts":     true,
	"agent_event_facts": true,
	"grant_levels":      true,
	"context_authors":   true,
}

// testSupport are packages that only tests import: harnesses that set up
// and inspect the database of a test, like _test.go files, which the rule
// does not cover.
var testSupport = []string{"internal/devtools/apitest", "internal/devtools/moduletest", "internal/devtools/runtest", "internal/platform/pgtest"}

// TestTableOwnership: every table, view and function created in
// migrations/ has an owner; only views and functions are shared, each
// with its owner; no Go file outside the owning package (tests and test
// support excepted) names a relation in SQL unless it is shared; and the
// body of a view or function names only its owner's relations and shared
// ones.
func TestTableOwnership(t *testing.T) {
	t.Parallel()
	root := moduletest.RepoRoot(t)
	rels := migrationRelations(t, filepath.Join(root, "migrations"))
	names := slices.Sorted(maps.Keys(rels))
	checkOwnersMatchMigrations(t, rels, names)
	for _, v := range sqlTableUses(t, root, rels) {
		if owner := owners[v.table]; owner != "" && owner != v.pkg && !shared[v.table] && !slices.Contains(testSupport, v.pkg) {
			t.Errorf("%s names %s %s in SQL, which belongs to %s: call a function of %s, or read a view or function %s shares", v.pos, rels[v.table].kind, v.table, owner, owner, owner)
		}
	}
	checkSharedBodies(t, rels, names)
}

// checkOwnersMatchMigrations checks owners and shared against rels, the
// relations the migrations create (names, sorted): every relation has an
// owner, owners and shared name only created relations, and shared names
// no table.
func checkOwnersMatchMigrations(t *testing.T, rels map[string]relation, names []string) {
	t.Helper()
	for _, name := range names {
		if owners[name] == "" {
			t.Errorf("%s %s (migrations/) has no owning package: add it to owners in internal/platform/db/ownership_test.go", rels[name].kind, name)
		}
	}
	for name := range owners {
		if _, ok := rels[name]; !ok {
			t.Errorf("owners names %s that no migration creates", name)
		}
	}
	for name := range shared {
		switch r, ok := rels[name]; {
		case !ok:
			t.Errorf("shared names %s that no migration creates", name)
		case r.kind == kindTable:
			t.Errorf("shared names table %s: a table stays private to its owner, which shares a view or function of it", name)
		}
	}
}

// checkSharedBodies checks that the body of every view and function of
// rels (names, sorted) names only its owner's relations and shared ones.
func checkSharedBodies(t *testing.T, rels map[string]relation, names []string) {
	t.Helper()
	for _, name := range names {
		r := rels[name]
		if r.kind == kindTable {
			continue
		}
		for _, used := range slices.Compact(slices.Sorted(slices.Values(sqlTables(r.body, false)))) {
			if _, ok := rels[used]; ok && owners[used] != owners[name] && !shared[used] {
				t.Errorf("%s %s (owned by %s) names %s of %s: read a view or function %s shares", r.kind, name, owners[name], used, owners[used], owners[used])
			}
		}
	}
}

// TestNoExportedSQL: no SQL text crosses a module in Go. A non-test Go file
// of internal/ declares no exported identifier ending in SQL (a fragment
// such as the former identity.PrincipalsSQL, pasted into another module's
// statement): a module reads a neighbour's rows through a Go function of
// the neighbour or through a view or function the neighbour shares
// (shared). The statement builder db.SQL is the one exception: it holds no
// SQL text.
func TestNoExportedSQL(t *testing.T) {
	t.Parallel()
	for _, d := range exportedSQL(t, moduletest.RepoRoot(t)) {
		t.Errorf("%s declares %s: share a view or function in a migration, or a Go function, instead of SQL text", d.pos, d.name)
	}
}

// TestNoExportedSQLDetects keeps TestNoExportedSQL honest: exported
// constants, variables, types, functions and methods ending in SQL are
// found, unexported ones and db.SQL are not.
func TestNoExportedSQLDetects(t *testing.T) {
	t.Parallel()
	src := `package p
const FactsSQL = "(SELECT 1)"
var (
	a, EndedRunsSQL = 1, "x"
	privateSQL = "y"
)
type RowSQL struct{}
func GrantLevelsSQL(now string) string { return now }
func (RowSQL) ColumnsSQL() string { return "" }
func (RowSQL) columnsSQL() string { return "" }
var SQLish, SQL = 1, 2
`
	dir := t.TempDir()
	for _, pkg := range []string{"internal/p", "internal/platform/db", "cmd/p"} {
		if err := os.MkdirAll(filepath.Join(dir, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pkg, "p.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, d := range exportedSQL(t, dir) {
		got = append(got, d.name)
	}
	sort.Strings(got)
	want := []string{"ColumnsSQL", "ColumnsSQL", "EndedRunsSQL", "EndedRunsSQL", "FactsSQL", "FactsSQL", "GrantLevelsSQL", "GrantLevelsSQL", "RowSQL", "RowSQL", "SQL"}
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
}

// sqlDecl is one exported declaration whose name ends in SQL.
type sqlDecl struct{ pos, name string }

// exportedSQL lists the exported top-level identifiers and methods ending
// in SQL in the non-test Go files under root/internal, db.SQL excepted.
func exportedSQL(t *testing.T, root string) []sqlDecl {
	t.Helper()
	var out []sqlDecl
	goSources(t, root, func(string, string) bool { return false }, func(pkg string, f *ast.File, fset *token.FileSet) {
		if !strings.HasPrefix(pkg, "internal/") {
			return
		}
		check := func(id *ast.Ident) {
			if id.IsExported() && strings.HasSuffix(id.Name, "SQL") && (pkg != "internal/platform/db" || id.Name != "SQL") {
				out = append(out, sqlDecl{pos: fset.Position(id.Pos()).String(), name: id.Name})
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				check(d.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch sp := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range sp.Names {
							check(n)
						}
					case *ast.TypeSpec:
						check(sp.Name)
					}
				}
			}
		}
	})
	return out
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
	_ = "SELECT ti.*, (SELECT coalesce(array_agg(level), '{}') FROM unnest(grant_levels ($1, $2, $3, $4))) FROM thread_info ti"
	_ = "the grant_levels of a thread_info row"
}
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	rels := map[string]relation{"grant_levels": {kind: kindFunction}, "thread_info": {kind: kindView}}
	for _, name := range []string{"messages", "threads", "runs", "grants", "channels", "spaces", "tokens", "agent_cursors", "event_log", "audit_log", "groups", "principals"} {
		rels[name] = relation{kind: kindTable}
	}
	var got []string
	for _, v := range sqlTableUses(t, dir, rels) {
		got = append(got, v.table)
	}
	sort.Strings(got)
	got = slices.Compact(got)
	want := []string{"agent_cursors", "audit_log", "channels", "event_log", "grant_levels", "grants", "groups", "messages", "principals", "runs", "spaces", "thread_info", "threads", "tokens"}
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
}

// tableUse is one string literal of a package that names a relation (a
// table, view or function) in SQL.
type tableUse struct {
	pkg, table, pos string
}

// The kinds of relation a migration creates.
const (
	kindTable    = "table"
	kindView     = "view"
	kindFunction = "function"
)

// relation is a table, view or function that a migration creates, with
// the SQL text of a view's or function's body.
type relation struct {
	kind, body string
}

var (
	createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
	// createView finds a view and its body up to the statement's end;
	// createFunction a function and its body (BEGIN ATOMIC ... END or
	// $$ ... $$).
	createView     = regexp.MustCompile(`(?is)\bCREATE\s+(?:OR\s+REPLACE\s+)?(?:MATERIALIZED\s+)?VIEW\s+([a-z_][a-z0-9_]*)\b(.*?);`)
	createFunction = regexp.MustCompile(`(?is)\bCREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([a-z_][a-z0-9_]*)\s*(\(.*?(?:\bEND\s*;|\$\$\s*;))`)
	// callPlace finds where SQL calls a function: a name before a
	// parenthesis (only the migrations' functions count).
	callPlace = regexp.MustCompile(`\b([a-z_][a-z0-9_]*)\s*\(`)
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

// migrationRelations lists the tables, views and functions the
// migrations in dir create.
func migrationRelations(t *testing.T, dir string) map[string]relation {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations in %s (%v)", dir, err)
	}
	rels := map[string]relation{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createTable.FindAllStringSubmatch(string(b), -1) {
			rels[strings.ToLower(m[1])] = relation{kind: kindTable}
		}
		for _, m := range createView.FindAllStringSubmatch(string(b), -1) {
			rels[strings.ToLower(m[1])] = relation{kind: kindView, body: m[2]}
		}
		for _, m := range createFunction.FindAllStringSubmatch(string(b), -1) {
			rels[strings.ToLower(m[1])] = relation{kind: kindFunction, body: m[2]}
		}
	}
	return rels
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
// tool folders skipped), the string literals that name one of rels in SQL
// (see sqlTables) or call one of its functions.
func sqlTableUses(t *testing.T, root string, rels map[string]relation) []tableUse {
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
			names := sqlTables(s, builderArgs[lit])
			for _, m := range callPlace.FindAllStringSubmatch(s, -1) {
				if rels[m[1]].kind == kindFunction {
					names = append(names, m[1])
				}
			}
			for _, name := range slices.Compact(slices.Sorted(slices.Values(names))) {
				if _, ok := rels[name]; ok {
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
