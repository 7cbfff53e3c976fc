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
	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
	"bothy.example.com/bothy/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestInTxRetries: a serialization failure or deadlock runs the whole unit
// again up to the configured retries; only the attempt that commits leaves
// rows; other errors roll back at once.
func TestInTxRetries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := probePool(t)
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
		{"no retries configured", 1, "40001", 0, 1, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `DELETE FROM tx_probe`); err != nil {
				t.Fatal(err)
			}
			d := db.New(pool, tc.retryMax)
			calls := 0
			err := d.InTx(ctx, func(ctx context.Context) error {
				calls++
				// Each attempt writes; only the committed attempt may stay.
				if _, err := d.Q(ctx).Exec(ctx, `INSERT INTO tx_probe VALUES (1)`); err != nil {
					return err
				}
				if calls <= tc.failures {
					return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: tc.code})
				}
				return nil
			})
			if (err != nil) != tc.wantErr || calls != tc.wantCalls {
				t.Fatalf("err %v after %d calls, want err=%v after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
			if n := probeRows(t, pool); n != tc.wantRows {
				t.Fatalf("%d rows committed, want %d", n, tc.wantRows)
			}
		})
	}
	var pgErr *pgconn.PgError
	if !db.Retryable(&pgconn.PgError{Code: "40001"}) || db.Retryable(errors.New("x")) || errors.As(errors.New("x"), &pgErr) {
		t.Fatal("Retryable")
	}
}

// TestInTxCarriesTheTransaction: Q answers the transaction inside InTx and
// the pool outside it; nested calls join the outer transaction (one commit,
// one rollback for all); an error rolls back everything the unit wrote.
func TestInTxCarriesTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := probePool(t)
	d := db.New(pool, 3)
	if q := db.Q(ctx, pool); q != db.Querier(pool) {
		t.Fatalf("Q outside a transaction is %T, want the pool", q)
	}
	if q := d.Q(ctx); q != db.Querier(pool) {
		t.Fatalf("DB.Q outside a transaction is %T, want the pool", q)
	}
	for _, tc := range inTxUnits(d, pool) {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pool.Exec(ctx, `DELETE FROM tx_probe`); err != nil {
				t.Fatal(err)
			}
			var inside db.Querier
			err := d.InTx(ctx, func(ctx context.Context) error {
				inside = d.Q(ctx)
				return tc.unit(ctx)
			})
			if _, isTx := inside.(pgx.Tx); !isTx {
				t.Fatalf("Q inside InTx is %T, want a transaction", inside)
			}
			switch {
			case tc.name == "a failed statement rolls back the unit":
				if err == nil {
					t.Fatal("a failed statement did not fail the unit")
				}
			case !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil):
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if n := probeRows(t, pool); n != tc.wantRows {
				t.Fatalf("%d rows committed, want %d", n, tc.wantRows)
			}
		})
	}
}

// inTxUnit is a case of TestInTxCarriesTheTransaction: a unit of work run
// by InTx, the error InTx must return and the rows that must stay committed.
type inTxUnit struct {
	name     string
	unit     func(ctx context.Context) error
	wantErr  error
	wantRows int
}

// inTxUnits returns the cases of TestInTxCarriesTheTransaction: units of d
// on pool that commit, or fail with an error of their own or a failed
// statement, alone or with nested InTx calls.
func inTxUnits(d *db.DB, pool *pgxpool.Pool) []inTxUnit {
	errBoom := errors.New("boom")
	insert := func(ctx context.Context) error {
		_, err := d.Q(ctx).Exec(ctx, `INSERT INTO tx_probe VALUES (1)`)
		return err
	}
	return []inTxUnit{
		{"commit", insert, nil, 1},
		{"rollback on error", func(ctx context.Context) error {
			if err := insert(ctx); err != nil {
				return err
			}
			return errBoom
		}, errBoom, 0},
		{"nested calls commit with the outer unit", func(ctx context.Context) error {
			if err := insert(ctx); err != nil {
				return err
			}
			return d.InTx(ctx, func(inner context.Context) error {
				if db.Q(inner, pool) != db.Q(ctx, pool) {
					return errors.New("the nested unit runs on another transaction")
				}
				return insert(inner)
			})
		}, nil, 2},
		{"an error of a nested call rolls back the outer unit", func(ctx context.Context) error {
			if err := insert(ctx); err != nil {
				return err
			}
			return d.InTx(ctx, func(ctx context.Context) error {
				if err := insert(ctx); err != nil {
					return err
				}
				return errBoom
			})
		}, errBoom, 0},
		{"the outer error rolls back a nested call that succeeded", func(ctx context.Context) error {
			if err := d.InTx(ctx, insert); err != nil {
				return err
			}
			return errBoom
		}, errBoom, 0},
		{"a failed statement rolls back the unit", func(ctx context.Context) error {
			if err := insert(ctx); err != nil {
				return err
			}
			_, err := d.Q(ctx).Exec(ctx, `INSERT INTO tx_probe VALUES ('not a number')`)
			return err
		}, nil, 0},
	}
}

// TestInTxNestedRetryRunsTheOuterUnit: a serialization failure inside a
// nested call cannot be cured inside the aborted transaction: the whole
// outer unit runs again, and only its last attempt commits.
func TestInTxNestedRetryRunsTheOuterUnit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := probePool(t)
	d := db.New(pool, 3)
	outer, inner := 0, 0
	err := d.InTx(ctx, func(ctx context.Context) error {
		outer++
		if _, err := d.Q(ctx).Exec(ctx, `INSERT INTO tx_probe VALUES (1)`); err != nil {
			return err
		}
		return d.InTx(ctx, func(ctx context.Context) error {
			inner++
			if _, err := d.Q(ctx).Exec(ctx, `INSERT INTO tx_probe VALUES (2)`); err != nil {
				return err
			}
			if inner == 1 {
				return &pgconn.PgError{Code: "40001"}
			}
			return nil
		})
	})
	if err != nil || outer != 2 || inner != 2 {
		t.Fatalf("err %v after %d outer and %d inner runs, want nil after 2 and 2", err, outer, inner)
	}
	if n := probeRows(t, pool); n != 2 {
		t.Fatalf("%d rows committed, want the 2 of the last attempt", n)
	}
}

// TestInTxRealSerializationFailure: two serializable units that read and
// write the same row conflict for real; the loser is retried by InTx and
// both increments land.
func TestInTxRealSerializationFailure(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := probePool(t)
	d := db.New(pool, 5)
	if _, err := pool.Exec(ctx, `INSERT INTO tx_probe VALUES (0)`); err != nil {
		t.Fatal(err)
	}
	firstRead := make(chan struct{})
	secondDone := make(chan error, 1)
	attempts := 0
	err := d.InTx(ctx, func(ctx context.Context) error {
		attempts++
		q := d.Q(ctx)
		if _, err := q.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL SERIALIZABLE`); err != nil {
			return err
		}
		var n int
		if err := q.QueryRow(ctx, `SELECT n FROM tx_probe`).Scan(&n); err != nil {
			return err
		}
		if attempts == 1 {
			// Another unit commits a change of the row this one read.
			close(firstRead)
			go func() {
				secondDone <- d.InTx(context.Background(), func(ctx context.Context) error {
					_, err := d.Q(ctx).Exec(ctx, `UPDATE tx_probe SET n = n + 1`)
					return err
				})
			}()
			if err := <-secondDone; err != nil {
				return fmt.Errorf("the concurrent unit: %w", err)
			}
		}
		_, err := q.Exec(ctx, `UPDATE tx_probe SET n = $1`, n+1)
		return err
	})
	if err != nil || attempts != 2 {
		t.Fatalf("err %v after %d attempts, want nil after 2", err, attempts)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT n FROM tx_probe`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("n = %d (%v), want both increments", n, err)
	}
}

// probePool opens a pool on a fresh test database with an empty tx_probe
// table of one int column.
func probePool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, db.Options{URL: pgtest.URL(t), MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE tx_probe (n int)`); err != nil {
		t.Fatal(err)
	}
	return pool
}

// probeRows counts the committed rows of tx_probe.
func probeRows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM tx_probe`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
