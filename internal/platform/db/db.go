// Package db owns Bothy's access to PostgreSQL: the pgx connection pool, the
// transaction carried in the context (InTx, retried on serialization failure
// and deadlock; Q gives the querier of a context), the deadlines of a
// request's database work (Limits), the squirrel statement builder and the
// embedded migrations. Which package owns which table is
// written down in ownership_test.go.
package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SQL is the statement builder every store uses: squirrel with PostgreSQL's
// $n placeholders.
var SQL = sq.StatementBuilder.PlaceholderFormat(sq.Dollar)

// Options configures Open.
type Options struct {
	// URL is the PostgreSQL connection string.
	URL string
	// MaxConns is the pool size (config key database.max_conns).
	MaxConns int
	// Tracer, when set, sees every statement (tests count statements with it).
	Tracer pgx.QueryTracer
	// Spans adds StatementSpans beside Tracer: one span per statement of a
	// traced request (tracing.otlp_endpoint is set). Without it the pool
	// has no tracer of its own, so tracing off costs nothing per statement.
	Spans bool
	// PoolerMode is for a URL that goes through a transaction-mode pooler
	// (config key database.pooler_mode): consecutive statements may reach
	// different server sessions, so the pool keeps no named prepared
	// statements. It still caches statement descriptions (parameter and
	// result types, learnt through the unnamed statement), which hold on
	// every session of the same schema and keep []byte arguments for json
	// columns typed correctly.
	PoolerMode bool
}

// Open connects a pool to opts.URL and checks that the database answers.
// Errors say that the database could not be reached; they never carry the
// password of the URL.
func Open(ctx context.Context, opts Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		return nil, errors.New("database.url is not a valid PostgreSQL connection string")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = int32(opts.MaxConns)
	}
	switch {
	case opts.Spans && opts.Tracer != nil:
		cfg.ConnConfig.Tracer = multitracer.New(opts.Tracer, StatementSpans{})
	case opts.Spans:
		cfg.ConnConfig.Tracer = StatementSpans{}
	case opts.Tracer != nil:
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	if opts.PoolerMode {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		cfg.ConnConfig.StatementCacheCapacity = 0
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database at %s:%d does not answer: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// Querier is what both a pool and a transaction offer: what Q returns.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is the handle on the database that services share: it starts
// transactions (InTx) and hands out the querier a statement runs on (Q).
//
// The convention, the only one in Bothy: a transaction travels in the
// context. Code that must run as one unit wraps itself in InTx; every store
// method runs its statements on db.Q(ctx, pool), which is the transaction
// of ctx when there is one and the pool otherwise. So a store method called
// alone is its own statement, and the same method called inside an InTx is
// part of that transaction, without a querier parameter.
type DB struct {
	pool     *pgxpool.Pool
	retryMax int
}

// New returns a DB over pool whose transactions are retried up to retryMax
// times on serialization failure or deadlock (config key
// database.tx_retry_max).
func New(pool *pgxpool.Pool, retryMax int) *DB {
	return &DB{pool: pool, retryMax: retryMax}
}

// Pool is the connection pool, for what a querier cannot do (LISTEN on a
// dedicated connection, health checks).
func (d *DB) Pool() *pgxpool.Pool { return d.pool }

// Q is the querier for ctx: the transaction InTx put into ctx, or the pool.
func (d *DB) Q(ctx context.Context) Querier { return Q(ctx, d.pool) }

// txKey is the context key of the running transaction.
type txKey struct{}

// Q is the querier a statement for ctx runs on: the transaction that InTx
// carries in ctx, or pool when ctx carries none. Stores call it for every
// statement instead of taking a querier parameter.
//
// When ctx carries Limits (a request's context), a statement on the pool
// waits at most Limits.Acquire for a connection and runs at most
// Limits.Query (until its rows are closed or its row scanned), and a
// statement of the transaction runs within the transaction's deadline; an
// error of a passed deadline wraps ErrQueryTimeout or ErrAcquireTimeout.
func Q(ctx context.Context, pool Querier) Querier {
	lim, bounded := LimitsFrom(ctx)
	if tx, ok := ctx.Value(txKey{}).(pgx.Tx); ok {
		if bounded {
			return boundedTx{tx}
		}
		return tx
	}
	if bounded {
		return boundedPool{pool: pool, lim: lim}
	}
	return pool
}

// OnPool is the querier of a statement that must not join the transaction
// of ctx (an audit row that holds when the caller's unit rolls back, a read
// beside the transaction's own): pool, bounded by the Limits of ctx as Q
// bounds it.
func OnPool(ctx context.Context, pool Querier) Querier {
	if lim, ok := LimitsFrom(ctx); ok {
		return boundedPool{pool: pool, lim: lim}
	}
	return pool
}

// InTx runs fn in one transaction carried in the context fn receives, and
// commits when fn returns nil; any error rolls the transaction back and is
// returned as is. A call inside a running transaction (ctx already carries
// one) joins it: fn runs in the outer transaction, and its error fails the
// outer unit. On a serialization failure or deadlock (of fn or of the
// commit) the outermost unit runs again, up to the configured number of
// retries; fn must therefore have no effects outside the database.
//
// When ctx carries Limits (a request's context), the connection is waited
// for at most Limits.Acquire and each attempt, from BEGIN to COMMIT, runs
// at most Limits.Query: fn gets a context with that deadline, so nothing
// that waits longer (a long poll, a subscription) belongs inside fn.
func (d *DB) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if _, ok := ctx.Value(txKey{}).(pgx.Tx); ok {
		return fn(ctx)
	}
	var err error
	for attempt := 0; attempt <= d.retryMax; attempt++ {
		err = d.once(ctx, fn)
		if err == nil || !Retryable(err) {
			return err
		}
	}
	return err
}

func (d *DB) once(ctx context.Context, fn func(ctx context.Context) error) error {
	if lim, ok := LimitsFrom(ctx); ok {
		return d.bounded(ctx, lim, fn)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(context.WithValue(ctx, txKey{}, tx)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// bounded is once under lim: the connection is taken within lim.Acquire,
// and the transaction runs under a deadline of lim.Query that fn's context
// carries, so that its statements, and the commit, end when it passes.
func (d *DB) bounded(ctx context.Context, lim Limits, fn func(ctx context.Context) error) error {
	actx, cancelAcquire := withCause(ctx, lim.Acquire, ErrAcquireTimeout)
	conn, err := d.pool.Acquire(actx)
	err = timedOut(actx, err)
	cancelAcquire()
	if err != nil {
		return err
	}
	defer conn.Release()
	tctx, cancel := withCause(ctx, lim.Query, ErrQueryTimeout)
	defer cancel()
	tx, err := conn.Begin(tctx)
	if err != nil {
		return timedOut(tctx, err)
	}
	defer func() {
		// The rollback (nothing after a commit) has a bound of its own:
		// the transaction's may be over, and without one the ROLLBACK
		// would wait on a frozen server for ever. A rollback that fails
		// closes the connection, which ends the transaction as well.
		rctx, cancel := withCause(context.WithoutCancel(ctx), lim.Query, ErrQueryTimeout)
		tx.Rollback(rctx)
		cancel()
	}()
	if err := fn(context.WithValue(tctx, txKey{}, tx)); err != nil {
		return err
	}
	return timedOut(tctx, tx.Commit(tctx))
}

// Retryable reports whether err is a serialization failure (40001) or a
// deadlock (40P01), the two failures a repeat of the unit can cure.
func Retryable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return false
}

// IsUniqueViolation reports whether err is a unique violation (23505),
// optionally of the named constraint (empty matches any).
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return constraint == "" || pgErr.ConstraintName == constraint
	}
	return false
}

// Nullable returns nil for an empty string and s otherwise, for optional
// text and uuid columns, where absent is stored as NULL.
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Unreachable reports whether err means the database does not answer: the
// connection could not be made, broke, or the server is shutting down or
// starting (SQLSTATE classes 08 and 57P), or it did not answer within a
// deadline of Limits (ErrQueryTimeout, ErrAcquireTimeout). Such an error
// says nothing about the request; it answers 503 unavailable, not 500.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrQueryTimeout) || errors.Is(err, ErrAcquireTimeout) {
		// A deadline of a request's Limits passed: the database did not
		// answer in time, frozen or overloaded, which is an outage for
		// the request as much as a refused connection.
		return true
	}
	if errors.Is(err, context.Canceled) {
		// The request's own context ended (its client went away): pgx
		// reports it as a "timeout" that is safe to retry, but the
		// database answered nothing because nothing was asked of it.
		return false
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	// pgx reports a connection it closed after a failure as "conn closed";
	// a statement that never reached the server is safe to retry.
	return pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed")
}
