package db_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"bothy.example.com/bothy/internal/platform/db"
)

// TestUnreachable: errors of a database that does not answer count as an
// outage; a request whose own context was cancelled (its client went away)
// and the database's answers to a statement do not.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"client went away", fmt.Errorf("runs.change: timeout: context already done: %w", context.Canceled), false},
		{"cancelled", context.Canceled, false},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"eof", fmt.Errorf("read: %w", io.EOF), true},
		{"administrator shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"connection failure class", &pgconn.PgError{Code: "08006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"a bug", errors.New("runs.change: something else"), false},
		{"query deadline of a request", fmt.Errorf("runs.change: %w", db.ErrQueryTimeout), true},
		{"acquire deadline of a request", fmt.Errorf("runs.change: %w", db.ErrAcquireTimeout), true},
	} {
		if got := db.Unreachable(tc.err); got != tc.want {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
