package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"bothy.example.com/bothy/internal/platform/db"
)

// slow outlasts the query bound of the tests by far: a statement that
// returns without error was not bounded.
const slow = `SELECT pg_sleep(3)`

// wantTimeout checks that err is a deadline of ours of the given cause and
// classifies as an unreachable database.
func wantTimeout(t *testing.T, what string, err, cause error) {
	t.Helper()
	if !errors.Is(err, cause) || !db.Unreachable(err) {
		t.Errorf("%s: %v (unreachable %v); want %v, unreachable", what, err, db.Unreachable(err), cause)
	}
}

// TestLimitsBoundStatements: under Limits a statement on the pool ends at
// the query deadline (Exec, Query, QueryRow) with ErrQueryTimeout, which
// counts as unreachable; statements that finish give their connection back
// when their rows are read or scanned; a context without Limits gets the
// pool itself.
func TestLimitsBoundStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := probePool(t)
	if db.Q(ctx, pool) != db.Querier(pool) {
		t.Error("Q without Limits is not the pool")
	}
	// The acquire bound is not under test here and is wide: a statement
	// the deadline ended closed its connection, so the next one dials a
	// new one, which on a loaded machine takes longer than the query bound.
	lctx := db.WithLimits(ctx, db.Limits{Query: 300 * time.Millisecond, Acquire: 10 * time.Second})
	q := db.Q(lctx, pool)

	_, err := q.Exec(lctx, slow)
	wantTimeout(t, "Exec", err, db.ErrQueryTimeout)
	rows, err := q.Query(lctx, slow)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
	}
	wantTimeout(t, "Query", err, db.ErrQueryTimeout)
	wantTimeout(t, "QueryRow", q.QueryRow(lctx, slow).Scan(new(any)), db.ErrQueryTimeout)
	wantTimeout(t, "OnPool", func() error { _, err := db.OnPool(lctx, pool).Exec(lctx, slow); return err }(), db.ErrQueryTimeout)

	wantPlainAnswers(t, lctx, q)
	// A connection the deadline closed is destroyed in the background
	// (puddle), and counts as taken until then: no signal tells when, so
	// the count is polled.
	for deadline := time.Now().Add(5 * time.Second); pool.Stat().AcquiredConns() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still taken after the statements ended", pool.Stat().AcquiredConns())
		}
	}

	// The caller's own end is not ours: a cancelled request or a shorter
	// deadline of its own is no outage of the database.
	cctx, cancel := context.WithCancel(lctx)
	cancel()
	if _, err := q.Exec(cctx, `SELECT 1`); err == nil || errors.Is(err, db.ErrQueryTimeout) || db.Unreachable(err) {
		t.Errorf("a cancelled caller: %v (unreachable %v)", err, db.Unreachable(err))
	}
	dctx, cancel := context.WithTimeout(lctx, 50*time.Millisecond)
	defer cancel()
	if _, err := q.Exec(dctx, slow); err == nil || errors.Is(err, db.ErrQueryTimeout) {
		t.Errorf("a caller's own deadline: %v", err)
	}
}

// wantPlainAnswers checks that statements on q within the bound of lctx
// answer as pgx's own do: rows collected, ErrNoRows for no row, a
// scanned value.
func wantPlainAnswers(t *testing.T, lctx context.Context, q db.Querier) {
	t.Helper()
	// Statements within the bound answer as pgx's own do.
	rows, err := q.Query(lctx, `SELECT generate_series(1, 3)`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(n) != 3 {
		t.Errorf("rows: %v %v", n, err)
	}
	if err := q.QueryRow(lctx, `SELECT 1 WHERE false`).Scan(new(int)); !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("QueryRow of no row: %v", err)
	}
	var one int
	if err := q.QueryRow(lctx, `SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Errorf("QueryRow: %d %v", one, err)
	}
}

// TestLimitsBoundTransactions: under Limits InTx ends at the query
// deadline however many statements the unit runs, rolls back, and reports
// ErrQueryTimeout; a unit within the bound commits.
func TestLimitsBoundTransactions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := probePool(t)
	d := db.New(pool, 3)
	// The acquire bound is not under test here and is wide: a statement
	// the deadline ended closed its connection, so the next one dials a
	// new one, which on a loaded machine takes longer than the query bound.
	lctx := db.WithLimits(ctx, db.Limits{Query: 300 * time.Millisecond, Acquire: 10 * time.Second})
	err := d.InTx(lctx, func(ctx context.Context) error {
		if _, err := d.Q(ctx).Exec(ctx, `INSERT INTO tx_probe VALUES (1)`); err != nil {
			return err
		}
		_, err := d.Q(ctx).Exec(ctx, slow)
		return err
	})
	wantTimeout(t, "InTx", err, db.ErrQueryTimeout)
	if err := d.InTx(lctx, func(ctx context.Context) error {
		_, err := d.Q(ctx).Exec(ctx, `INSERT INTO tx_probe VALUES (2)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := probeRows(t, pool); n != 1 {
		t.Errorf("%d rows committed; want 1 (the timed-out unit rolled back)", n)
	}
}

// TestLimitsBoundTheAcquire: with every connection of the pool taken, a
// statement and a transaction under Limits give up after Limits.Acquire
// with ErrAcquireTimeout, which counts as unreachable.
func TestLimitsBoundTheAcquire(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := probePool(t)
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	lctx := db.WithLimits(ctx, db.Limits{Query: 300 * time.Millisecond, Acquire: 100 * time.Millisecond})
	_, err := db.Q(lctx, pool).Exec(lctx, `SELECT 1`)
	wantTimeout(t, "Exec", err, db.ErrAcquireTimeout)
	err = db.New(pool, 0).InTx(lctx, func(context.Context) error { return nil })
	wantTimeout(t, "InTx", err, db.ErrAcquireTimeout)
	for _, c := range held {
		c.Release()
	}
	if _, err := db.Q(lctx, pool).Exec(lctx, `SELECT 1`); err != nil {
		t.Errorf("with a free connection: %v", err)
	}
}
