package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Limits bound the database work of a request (config keys
// database.query_timeout and database.acquire_timeout). They are deadlines
// of this process on its context, not PostgreSQL's statement_timeout: a
// frozen server, or a transaction-mode pooler in front of one, never sees
// a setting, but a deadline of the client ends the wait all the same.
type Limits struct {
	// Query bounds one statement outside a transaction, from its start to
	// its last row, or a whole transaction, from BEGIN to COMMIT.
	Query time.Duration
	// Acquire bounds the wait for a connection of the pool before the
	// statement or the transaction starts.
	Acquire time.Duration
}

// ErrQueryTimeout and ErrAcquireTimeout are the causes of the deadlines
// Limits set (context.Cause): an error that wraps one of them is a
// deadline of ours, not the caller going away, and counts as an
// unreachable database (Unreachable).
var (
	ErrQueryTimeout   = errors.New("the database did not answer within database.query_timeout")
	ErrAcquireTimeout = errors.New("no database connection was free within database.acquire_timeout")
)

// limitsKey is the context key of a request's Limits.
type limitsKey struct{}

// WithLimits returns ctx carrying l: the statements and transactions of
// ctx (Q, OnPool, DB.InTx) then run under l's deadlines. The HTTP server
// puts them into every request; work outside requests (sweepers,
// retention, the LISTEN connection, migrations, the command line) carries
// none and so runs unbounded. A zero field leaves its bound out.
func WithLimits(ctx context.Context, l Limits) context.Context {
	return context.WithValue(ctx, limitsKey{}, l)
}

// LimitsFrom returns the Limits ctx carries, and whether it carries any.
func LimitsFrom(ctx context.Context) (Limits, bool) {
	l, ok := ctx.Value(limitsKey{}).(Limits)
	return l, ok
}

// withCause returns ctx bounded by d with cause, or ctx itself (and a
// cancel that does nothing) when d is not positive.
func withCause(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, d, cause)
}

// timeoutError is a database error that happened because a deadline of
// Limits passed: it wraps both the deadline's cause and what pgx said.
type timeoutError struct {
	cause error // ErrQueryTimeout or ErrAcquireTimeout
	err   error
}

func (e *timeoutError) Error() string   { return fmt.Sprintf("%v: %v", e.cause, e.err) }
func (e *timeoutError) Unwrap() []error { return []error{e.cause, e.err} }

// timedOut returns err marked as a deadline of ours when ctx ended because
// one of Limits' deadlines passed, and err unchanged otherwise: pgx
// reports every deadline alike ("timeout: context deadline exceeded"), and
// only the context's cause tells ours from one of the caller's.
func timedOut(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	cause := context.Cause(ctx)
	if !errors.Is(cause, ErrQueryTimeout) && !errors.Is(cause, ErrAcquireTimeout) {
		return err
	}
	if errors.Is(err, cause) {
		return err
	}
	return &timeoutError{cause: cause, err: err}
}

// acquirer is what a pool offers beyond a Querier: a connection of its own
// (*pgxpool.Pool), so that waiting for one is bounded apart from the
// statement.
type acquirer interface {
	Acquire(ctx context.Context) (*pgxpool.Conn, error)
}

// boundedPool is the querier of a statement of a context with Limits
// outside a transaction: each statement takes a connection of the pool
// within Limits.Acquire and runs under Limits.Query, until its rows are
// closed (Query) or scanned (QueryRow).
type boundedPool struct {
	pool Querier
	lim  Limits
}

// start takes the connection a statement of ctx runs on and returns it
// with the statement's context and done, which gives the connection back
// and ends the deadline. A pool that cannot hand out a connection (not a
// *pgxpool.Pool) runs the statement itself, under the query deadline only.
func (b boundedPool) start(ctx context.Context) (Querier, context.Context, func(), error) {
	q, release := b.pool, func() {}
	if a, ok := b.pool.(acquirer); ok {
		actx, cancel := withCause(ctx, b.lim.Acquire, ErrAcquireTimeout)
		conn, err := a.Acquire(actx)
		err = timedOut(actx, err)
		cancel()
		if err != nil {
			return nil, nil, nil, err
		}
		q, release = conn, conn.Release
	}
	qctx, cancel := withCause(ctx, b.lim.Query, ErrQueryTimeout)
	return q, qctx, func() { release(); cancel() }, nil
}

// Exec runs sql under the bounds.
func (b boundedPool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	q, qctx, done, err := b.start(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer done()
	tag, err := q.Exec(qctx, sql, args...)
	return tag, timedOut(qctx, err)
}

// Query runs sql under the bounds; the connection stays taken and the
// deadline runs until the rows are closed (or read to their end).
func (b boundedPool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	q, qctx, done, err := b.start(ctx)
	if err != nil {
		return errRows{err}, err
	}
	rows, err := q.Query(qctx, sql, args...)
	if err != nil {
		if rows != nil {
			rows.Close()
		}
		done()
		err = timedOut(qctx, err)
		return errRows{err}, err
	}
	return &boundRows{Rows: rows, ctx: qctx, done: done}, nil
}

// QueryRow runs sql under the bounds until its Scan.
func (b boundedPool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, _ := b.Query(ctx, sql, args...)
	return firstRow{rows}
}

// boundedTx is the querier of a transaction started under Limits: the
// transaction's deadline reaches its statements through their contexts,
// and their errors are marked when it passed (timedOut).
type boundedTx struct{ tx pgx.Tx }

// Exec runs sql in the transaction.
func (b boundedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	tag, err := b.tx.Exec(ctx, sql, args...)
	return tag, timedOut(ctx, err)
}

// Query runs sql in the transaction.
func (b boundedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	rows, err := b.tx.Query(ctx, sql, args...)
	if err != nil {
		if rows != nil {
			rows.Close()
		}
		err = timedOut(ctx, err)
		return errRows{err}, err
	}
	return &boundRows{Rows: rows, ctx: ctx}, nil
}

// QueryRow runs sql in the transaction.
func (b boundedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, _ := b.Query(ctx, sql, args...)
	return firstRow{rows}
}

// boundRows are the rows of a bounded statement: their errors are marked
// when the deadline passed, and closing them (which reading to the end
// does, as pgx's own rows do) runs done once.
type boundRows struct {
	pgx.Rows
	ctx    context.Context
	done   func() // nil in a transaction: the transaction holds its connection
	closed bool
}

// Next advances to the next row; after the last it closes the rows.
func (r *boundRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// Close closes the rows and then gives their connection back.
func (r *boundRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		if r.done != nil {
			r.done()
		}
	}
}

// Err is the rows' error, marked when the deadline passed.
func (r *boundRows) Err() error { return timedOut(r.ctx, r.Rows.Err()) }

// Scan reads the current row.
func (r *boundRows) Scan(dest ...any) error { return timedOut(r.ctx, r.Rows.Scan(dest...)) }

// Values returns the current row's values.
func (r *boundRows) Values() ([]any, error) {
	v, err := r.Rows.Values()
	return v, timedOut(r.ctx, err)
}

// firstRow is the Row of a bounded QueryRow: the first of its rows, which
// are closed after the Scan, as pgx's QueryRow does.
type firstRow struct{ rows pgx.Rows }

// Scan reads the first row into dest; no row is pgx.ErrNoRows.
func (r firstRow) Scan(dest ...any) error {
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// errRows are the rows of a statement that failed before it returned any.
type errRows struct{ err error }

func (errRows) Close()                                       {}
func (e errRows) Err() error                                 { return e.err }
func (errRows) CommandTag() pgconn.CommandTag                { return pgconn.CommandTag{} }
func (errRows) FieldDescriptions() []pgconn.FieldDescription { return nil }
func (errRows) Next() bool                                   { return false }
func (e errRows) Scan(...any) error                          { return e.err }
func (e errRows) Values() ([]any, error)                     { return nil, e.err }
func (errRows) RawValues() [][]byte                          { return nil }
func (errRows) Conn() *pgx.Conn                              { return nil }
func (errRows) TypeMap() *pgtype.Map                         { return nil }
