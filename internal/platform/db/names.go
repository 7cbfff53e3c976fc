package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Pool is the connection pool (Open's result). Code outside store files
// names it here: only store files import pgx (issue 48), so the wiring and
// the faces that hand a pool around do not reach for the driver.
type Pool = pgxpool.Pool

// Conn is one dedicated connection, such as the LISTEN connection of
// database.listen_url.
type Conn = pgx.Conn

// Connect opens a dedicated connection to url (not from the pool).
func Connect(ctx context.Context, url string) (*Conn, error) { return pgx.Connect(ctx, url) }
