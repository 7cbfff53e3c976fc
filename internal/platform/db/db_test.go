package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/pgtest"
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
	url := pgtest.URL(t) // already migrated from the template
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() { errs <- db.Migrate(context.Background(), url) }()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	pending, err := db.Pending(context.Background(), url)
	if err != nil || pending {
		t.Fatalf("pending %v err %v", pending, err)
	}
}
