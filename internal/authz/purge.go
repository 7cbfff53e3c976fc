package authz

import (
	"context"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
)

// DeleteOldAudit removes up to limit audit rows last seen before cutoff and
// returns how many it removed (the retention module calls it).
func (s *Service) DeleteOldAudit(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := db.Q(ctx, s.pool).Exec(ctx, `DELETE FROM audit_log WHERE id IN (
		SELECT id FROM audit_log WHERE last_at < $1 LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete old audit rows: %w", err)
	}
	return tag.RowsAffected(), nil
}
