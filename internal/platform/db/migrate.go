package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"bothy.example.com/bothy/migrations"
)

// Migrate applies every pending migration of the embedded set to the
// database at url. A PostgreSQL session advisory lock serialises concurrent
// callers, so several replicas can start at the same time.
func Migrate(ctx context.Context, url string) error {
	_, err := MigrateReport(ctx, url)
	return err
}

// Applied is one migration that MigrateReport applied.
type Applied struct {
	Version  int64
	Name     string
	Duration time.Duration
}

// MigrateReport is Migrate that also returns the migrations it applied, in
// order (none when the schema was current), for the start-up log.
func MigrateReport(ctx context.Context, url string) ([]Applied, error) {
	var out []Applied
	err := withProvider(url, func(p *goose.Provider, sqlDB *sql.DB) error {
		res, err := p.Up(ctx)
		for _, r := range res {
			if r.Error == nil && !r.Empty {
				out = append(out, Applied{Version: r.Source.Version, Name: path.Base(r.Source.Path), Duration: r.Duration})
			}
		}
		if err != nil {
			return err
		}
		// What each migration requires of a binary goes where an older
		// binary, which lacks the newer files, can read it.
		return recordRequirements(ctx, func(ctx context.Context, q string, args ...any) error {
			_, err := sqlDB.ExecContext(ctx, q, args...)
			return err
		})
	})
	return out, err
}

// MigrationState is one embedded migration and whether the database has it.
type MigrationState struct {
	Version   int64
	Name      string
	Applied   bool
	AppliedAt time.Time
}

// Status lists every embedded migration with its state in the database at
// url (bothy migrate status). It changes nothing but may create goose's
// version table, as goose does for every command.
func Status(ctx context.Context, url string) ([]MigrationState, error) {
	var out []MigrationState
	err := withProvider(url, func(p *goose.Provider, _ *sql.DB) error {
		st, err := p.Status(ctx)
		if err != nil {
			return err
		}
		for _, m := range st {
			out = append(out, MigrationState{Version: m.Source.Version, Name: path.Base(m.Source.Path),
				Applied: m.State == goose.StateApplied, AppliedAt: m.AppliedAt})
		}
		return nil
	})
	return out, err
}

// EmbeddedVersion is the version of the newest migration this binary
// carries: the schema version it needs.
func EmbeddedVersion() int64 {
	var newest int64
	names, _ := fs.Glob(migrations.FS, "*.sql")
	for _, n := range names {
		num, _, ok := strings.Cut(n, "_")
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(num, 10, 64); err == nil && v > newest {
			newest = v
		}
	}
	return newest
}

// SchemaVersion reads the newest applied migration version through q (the
// pool, so that probes share its connections). A database without goose's
// version table has version 0.
func SchemaVersion(ctx context.Context, q Querier) (int64, error) {
	var v int64
	err := q.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return 0, nil
	}
	return v, err
}

func withProvider(url string, fn func(*goose.Provider, *sql.DB) error) error {
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
	if err := fn(p, sqlDB); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// stdlib registers the "pgx" database/sql driver that goose uses.
var _ = stdlib.GetDefaultDriver
