package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"bothy.example.com/bothy/migrations"
)

// Migrate applies every pending migration of the embedded set to the
// database at url. A PostgreSQL session advisory lock serialises concurrent
// callers, so several replicas can start at the same time.
func Migrate(ctx context.Context, url string) error {
	return withProvider(url, func(p *goose.Provider) error {
		_, err := p.Up(ctx)
		return err
	})
}

// Pending reports whether the database at url lacks migrations of the
// embedded set (used by /readyz).
func Pending(ctx context.Context, url string) (bool, error) {
	var pending bool
	err := withProvider(url, func(p *goose.Provider) error {
		var err error
		pending, err = p.HasPending(ctx)
		return err
	})
	return pending, err
}

func withProvider(url string, fn func(*goose.Provider) error) error {
	sqlDB, err := sql.Open("pgx", url)
	if err != nil {
		return fmt.Errorf("migrations: open database: %w", err)
	}
	defer sqlDB.Close()
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS,
		goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := fn(p); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// stdlib registers the "pgx" database/sql driver that goose uses.
var _ = stdlib.GetDefaultDriver
