package db_test

import (
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
)

// TestDecideCompat: how a binary stands to a schema, from the recorded
// requirements of the migrations it does not know.
func TestDecideCompat(t *testing.T) {
	t.Parallel()
	r := func(v, req int64) db.Requirement { return db.Requirement{Version: v, Requires: req} }
	for _, c := range []struct {
		name           string
		binary, schema int64
		recorded       []db.Requirement
		want           db.Compatibility
		blocking       []int64
	}{
		{"current", 13, 13, nil, db.SchemaCurrent, nil},
		{"behind", 13, 12, nil, db.SchemaBehind, nil},
		{"one expand step ahead", 13, 14, []db.Requirement{r(13, 12), r(14, 13)}, db.SchemaNewerServable, nil},
		{"two expand steps ahead", 13, 15, []db.Requirement{r(14, 13), r(15, 14)}, db.SchemaNewer, []int64{15}},
		{"two steps, both served from 13", 13, 15, []db.Requirement{r(14, 13), r(15, 13)}, db.SchemaNewerServable, nil},
		{"a contract step ahead", 13, 14, []db.Requirement{r(14, 14)}, db.SchemaNewer, []int64{14}},
		{"a contract step among expand steps", 13, 16, []db.Requirement{r(14, 13), r(15, 15), r(16, 13)}, db.SchemaNewer, []int64{15}},
		{"unrecorded", 13, 14, nil, db.SchemaNewer, []int64{14}},
		{"older rows do not count", 13, 14, []db.Requirement{r(12, 12), r(14, 12)}, db.SchemaNewerServable, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := db.Decide(c.binary, c.schema, c.recorded)
			if got.Case != c.want || !slices.Equal(got.Blocking, c.blocking) || got.Schema != c.schema || got.Binary != c.binary {
				t.Fatalf("Decide = %+v, want case %d blocking %v", got, c.want, c.blocking)
			}
		})
	}
}

// TestMigrationRequirements: every migration states what it requires of a
// binary; run tokens (12) are a contract step, because a binary that does
// not know them would take a run token for its agent's full token.
func TestMigrationRequirements(t *testing.T) {
	t.Parallel()
	reqs, err := db.EmbeddedRequirements()
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(reqs)) != db.EmbeddedVersion() {
		t.Fatalf("%d requirements for %d migrations", len(reqs), db.EmbeddedVersion())
	}
	for _, r := range reqs {
		if r.Version == 12 && r.Requires != 12 {
			t.Fatalf("migration 12 requires %d, want 12 (a contract step)", r.Requires)
		}
	}
}

// migratedPool returns a one-connection pool on a fresh test database
// after bothy migrate ran on it (which records the requirements too),
// closed when t ends.
func migratedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := pgtest.URL(t)
	if err := db.Migrate(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	pool, err := db.Open(t.Context(), db.Options{URL: url, MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestMigrateRecordsRequirements: bothy migrate records every migration's
// requirement where an older binary reads it, and Compat finds the schema
// current for this binary.
func TestMigrateRecordsRequirements(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	var n int64
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM schema_compat`).Scan(&n); err != nil || n != db.EmbeddedVersion() {
		t.Fatalf("%d recorded requirements (%v)", n, err)
	}
	if st, err := db.Compat(t.Context(), pool); err != nil || st.Case != db.SchemaCurrent {
		t.Fatalf("compat %+v %v", st, err)
	}
}
