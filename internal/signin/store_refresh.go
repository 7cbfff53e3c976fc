package signin

import (
	"context"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
)

// refreshRow is a session's refresh token at the provider.
type refreshRow struct {
	tokenID, principalID, refresh string
}

// insertRefresh keeps the provider's refresh token of session tokenID.
func (s *Service) insertRefresh(ctx context.Context, tokenID, principalID, refresh string, now time.Time) error {
	if _, err := db.Q(ctx, s.pool).Exec(ctx, `INSERT INTO signin_refresh (token_id, principal_id, refresh_token, checked_at) VALUES ($1, $2, $3, $4)`,
		tokenID, principalID, refresh, now); err != nil {
		return fmt.Errorf("keep refresh token: %w", err)
	}
	return nil
}

// dueRefresh returns up to limit sessions last checked before cutoff,
// oldest first.
func (s *Service) dueRefresh(ctx context.Context, cutoff time.Time, limit int) ([]refreshRow, error) {
	rows, err := db.Q(ctx, s.pool).Query(ctx, `SELECT token_id::text, principal_id::text, refresh_token FROM signin_refresh
		WHERE checked_at <= $1 ORDER BY checked_at, token_id LIMIT $2`, cutoff, limit)
	if err != nil {
		return nil, fmt.Errorf("due refresh tokens: %w", err)
	}
	defer rows.Close()
	var out []refreshRow
	for rows.Next() {
		var r refreshRow
		if err := rows.Scan(&r.tokenID, &r.principalID, &r.refresh); err != nil {
			return nil, fmt.Errorf("due refresh tokens: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// checkedRefresh records a successful check of session tokenID and the
// refresh token the provider answered (providers may rotate it).
func (s *Service) checkedRefresh(ctx context.Context, tokenID, refresh string, now time.Time) error {
	if _, err := db.Q(ctx, s.pool).Exec(ctx, `UPDATE signin_refresh SET refresh_token = $2, checked_at = $3 WHERE token_id = $1`,
		tokenID, refresh, now); err != nil {
		return fmt.Errorf("record refresh check: %w", err)
	}
	return nil
}

// dropRefresh forgets the refresh tokens of the sessions tokenIDs.
func (s *Service) dropRefresh(ctx context.Context, tokenIDs []string) error {
	if _, err := db.Q(ctx, s.pool).Exec(ctx, `DELETE FROM signin_refresh WHERE token_id = ANY($1::uuid[])`, tokenIDs); err != nil {
		return fmt.Errorf("drop refresh tokens: %w", err)
	}
	return nil
}

// dropPersonRefresh forgets the refresh tokens of every session of
// principalID (after the provider refused the person).
func (s *Service) dropPersonRefresh(ctx context.Context, principalID string) error {
	if _, err := db.Q(ctx, s.pool).Exec(ctx, `DELETE FROM signin_refresh WHERE principal_id = $1`, principalID); err != nil {
		return fmt.Errorf("drop refresh tokens: %w", err)
	}
	return nil
}
