// Package db owns Bothy's access to PostgreSQL: the pgx connection pool, the
// unit of work (one transaction, retried on serialization failure and
// deadlock), the squirrel statement builder and the embedded migrations.
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
	if opts.Tracer != nil {
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

// Querier is what both a pool and a transaction offer; stores take it so
// that the same code runs inside and outside a unit of work.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// UnitOfWork runs units of work, each in one transaction.
type UnitOfWork struct {
	pool     *pgxpool.Pool
	retryMax int
}

// NewUnitOfWork returns a UnitOfWork over pool that retries a unit up to
// retryMax times (config key database.tx_retry_max).
func NewUnitOfWork(pool *pgxpool.Pool, retryMax int) *UnitOfWork {
	return &UnitOfWork{pool: pool, retryMax: retryMax}
}

// Do runs fn in one transaction and commits when fn returns nil. On a
// serialization failure or deadlock (of fn or of the commit) the whole unit
// runs again, up to the configured number of retries; fn must therefore have
// no effects outside tx. Any other error rolls back and is returned as is.
func (u *UnitOfWork) Do(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt <= u.retryMax; attempt++ {
		err = u.once(ctx, fn)
		if err == nil || !Retryable(err) {
			return err
		}
	}
	return err
}

func (u *UnitOfWork) once(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := u.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
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
// starting (SQLSTATE classes 08 and 57P). Such an error says nothing about
// the request; it answers 503 unavailable, not 500.
func Unreachable(err error) bool {
	if err == nil {
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
