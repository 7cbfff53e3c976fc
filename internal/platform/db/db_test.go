package db_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestUnitOfWorkRetries(t *testing.T) {
	ctx := context.Background()
	pool, err := db.Open(ctx, db.Options{URL: pgtest.URL(t), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE uow_probe (n int)`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		failures  int
		code      string
		retryMax  int
		wantCalls int
		wantRows  int
		wantErr   bool
	}{
		{"serialization failure then success", 1, "40001", 3, 2, 1, false},
		{"deadlock twice then success", 2, "40P01", 3, 3, 1, false},
		{"retries exhausted", 5, "40001", 2, 3, 0, true},
		{"other errors are not retried", 1, "23505", 3, 1, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool.Exec(ctx, `DELETE FROM uow_probe`)
			uow := db.NewUnitOfWork(pool, tc.retryMax)
			calls := 0
			err := uow.Do(ctx, func(tx pgx.Tx) error {
				calls++
				// Each attempt writes; only the committed attempt may stay.
				if _, err := tx.Exec(ctx, `INSERT INTO uow_probe VALUES (1)`); err != nil {
					return err
				}
				if calls <= tc.failures {
					return &pgconn.PgError{Code: tc.code}
				}
				return nil
			})
			if (err != nil) != tc.wantErr || calls != tc.wantCalls {
				t.Fatalf("err %v after %d calls, want err=%v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
			var n int
			pool.QueryRow(ctx, `SELECT count(*) FROM uow_probe`).Scan(&n)
			if n != tc.wantRows {
				t.Fatalf("%d rows committed, want %d", n, tc.wantRows)
			}
		})
	}
	var pgErr *pgconn.PgError
	if !db.Retryable(&pgconn.PgError{Code: "40001"}) || db.Retryable(errors.New("x")) || errors.As(errors.New("x"), &pgErr) {
		t.Fatal("Retryable")
	}
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	// An empty, unmigrated database: the three migrators race for every
	// migration, which is what the advisory lock must serialise. A fourth
	// run afterwards must find nothing to do.
	url := emptyDatabase(t)
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { errs <- db.Migrate(context.Background(), url) }()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if again, err := db.MigrateReport(context.Background(), url); err != nil || len(again) != 0 {
		t.Fatalf("a second Migrate applied %+v (%v), want nothing", again, err)
	}
	st, err := db.Status(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range st {
		if !m.Applied {
			t.Fatalf("migration %s pending after Migrate", m.Name)
		}
	}
	pool, err := db.Open(context.Background(), db.Options{URL: url, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if v, err := db.SchemaVersion(context.Background(), pool); err != nil || v != db.EmbeddedVersion() || v == 0 {
		t.Fatalf("schema version %d (%v), want the embedded %d", v, err, db.EmbeddedVersion())
	}
}

// TestStatusOfEmptyDatabase: a database without any migration lists every
// embedded migration as pending, has schema version 0, and MigrateReport
// names each migration it applies, once.
func TestStatusOfEmptyDatabase(t *testing.T) {
	ctx := context.Background()
	url := emptyDatabase(t)
	st, err := db.Status(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := fs.Glob(migrations.FS, "*.sql")
	if len(st) == 0 || len(st) != len(files) || st[len(st)-1].Version != db.EmbeddedVersion() {
		t.Fatalf("%d migrations listed, want the %d embedded ones up to %d", len(st), len(files), db.EmbeddedVersion())
	}
	for _, m := range st {
		if m.Applied {
			t.Fatalf("%s applied on an empty database", m.Name)
		}
	}
	pool, err := db.Open(ctx, db.Options{URL: url, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if v, err := db.SchemaVersion(ctx, pool); err != nil || v != 0 {
		t.Fatalf("schema version %d (%v), want 0", v, err)
	}
	applied, err := db.MigrateReport(ctx, url)
	if err != nil || len(applied) != len(st) || applied[0].Version != 1 {
		t.Fatalf("applied %+v (%v)", applied, err)
	}
	again, err := db.MigrateReport(ctx, url)
	if err != nil || len(again) != 0 {
		t.Fatalf("second run applied %+v (%v)", again, err)
	}
}

// TestPoolerModeRunsStatements: a pool in pooler mode runs parameterised
// statements of every type the stores use without named prepared statements.
func TestPoolerModeRunsStatements(t *testing.T) {
	ctx := context.Background()
	pool, err := db.Open(ctx, db.Options{URL: pgtest.URL(t), MaxConns: 2, PoolerMode: true})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := 0; i < 3; i++ {
		var n int
		var s string
		// A JSON document as []byte, as the event log writes payloads.
		if err := pool.QueryRow(ctx, `SELECT $1::int + 1, ($2::jsonb)->>'k'`, i, []byte(`{"k":"x"}`)).Scan(&n, &s); err != nil || n != i+1 || s != "x" {
			t.Fatalf("got %d %q (%v)", n, s, err)
		}
	}
	var prepared int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements`).Scan(&prepared); err != nil || prepared != 0 {
		t.Fatalf("%d prepared statements in pooler mode (%v)", prepared, err)
	}
}

// emptyDatabase creates a database without migrations for t.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	admin, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := db.Open(ctx, db.Options{URL: admin, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	name := fmt.Sprintf("empty_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
