package db_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestSharedViewsHoldTheirColumns: a later migration cannot drop a column
// that a shared view or function (migrations/00015_module_views.sql)
// reads: PostgreSQL refuses (dependent_objects_still_exist), so the
// migration fails where it is written, not a request of another module
// later. grant_levels and context_authors count too, because their
// bodies are BEGIN ATOMIC.
func TestSharedViewsHoldTheirColumns(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	for _, stmt := range []string{
		`ALTER TABLE messages DROP COLUMN thread_seq`,
		`ALTER TABLE threads DROP COLUMN title`,
		`ALTER TABLE principals DROP COLUMN handle`,
		`ALTER TABLE group_members DROP COLUMN principal_id`,
		`ALTER TABLE agent_events DROP COLUMN message_id`,
		`ALTER TABLE runs DROP COLUMN state`,
		`ALTER TABLE grants DROP COLUMN expires_at`,
		`ALTER TABLE messages DROP COLUMN deleted_at`, // only context_authors reads it
	} {
		_, err := pool.Exec(t.Context(), stmt)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "2BP01" {
			t.Errorf("%s: %v, want dependent_objects_still_exist (2BP01)", stmt, err)
		}
	}
}
