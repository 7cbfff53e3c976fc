package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// LastUsedGranularity is how often last_used_at of one token is written at
// most: a busy token must not turn every request into a write.
const LastUsedGranularity = time.Minute

// TokenInfo is a token as listed: everything but the secret and its hash.
type TokenInfo struct {
	ID          string
	PrincipalID string
	Kind        TokenKind
	Label       string
	CreatedAt   time.Time
	ExpiresAt   *time.Time
	LastUsedAt  *time.Time
	RevokedAt   *time.Time
}

const tokenInfoColumns = "id, principal_id, kind, label, created_at, expires_at, last_used_at, revoked_at"

func scanTokenInfo(row pgx.Row) (TokenInfo, error) {
	var t TokenInfo
	err := row.Scan(&t.ID, &t.PrincipalID, &t.Kind, &t.Label, &t.CreatedAt, &t.ExpiresAt, &t.LastUsedAt, &t.RevokedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return TokenInfo{}, ErrNotFound
	}
	t.CreatedAt = t.CreatedAt.UTC()
	for _, p := range []*time.Time{t.ExpiresAt, t.LastUsedAt, t.RevokedAt} {
		if p != nil {
			*p = p.UTC()
		}
	}
	return t, err
}

// GetToken returns the token with id (without its secret), or ErrNotFound.
func (s *Service) GetToken(ctx context.Context, id string) (TokenInfo, error) {
	return s.getToken(ctx, id)
}

func (s *Service) getToken(ctx context.Context, id string) (TokenInfo, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return TokenInfo{}, ErrNotFound
	}
	sqlText, args := db.SQL.Select(tokenInfoColumns).From("tokens").Where(sq.Eq{"id": id}).MustSql()
	return scanTokenInfo(q.QueryRow(ctx, sqlText, args...))
}

// ListTokens returns the tokens of principal id, newest first, revoked and
// expired ones included (so that an owner sees what was issued).
func (s *Service) ListTokens(ctx context.Context, principalID string) ([]TokenInfo, error) {
	sqlText, args := db.SQL.Select(tokenInfoColumns).From("tokens").Where(sq.Eq{"principal_id": principalID}).
		OrderBy("created_at DESC", "id DESC").MustSql()
	rows, err := db.Q(ctx, s.pool).Query(ctx, sqlText, args...)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TokenInfo, error) { return scanTokenInfo(r) })
}

// RevokeTokenByID revokes the token with id and returns it. Revoking a
// revoked token answers it unchanged.
func (s *Service) RevokeTokenByID(ctx context.Context, id string) (TokenInfo, error) {
	q := db.Q(ctx, s.pool)
	sqlText, args := db.SQL.Update("tokens").Set("revoked_at", s.clock.Now()).
		Where(sq.Eq{"id": id}).Where("revoked_at IS NULL").MustSql()
	if _, err := q.Exec(ctx, sqlText, args...); err != nil {
		return TokenInfo{}, fmt.Errorf("revoke token: %w", err)
	}
	return s.getToken(ctx, id)
}

// ValidTTL checks a requested token lifetime: zero means "no expiry",
// anything below zero is refused (a negative lifetime must never turn into
// a token that lives for ever).
func ValidTTL(ttl time.Duration, pointer string) error {
	if ttl < 0 {
		return problem.Invalid(problem.FieldError{Pointer: pointer, Code: "out_of_range", Detail: "must not be negative"})
	}
	return nil
}

// touch records that token id was used now, at most once per
// LastUsedGranularity: the statement runs only when the stored time is
// older, and the condition in SQL keeps concurrent requests from writing
// twice.
func (s *Service) touch(ctx context.Context, id string, last *time.Time) {
	now := s.clock.Now()
	if last != nil && now.Sub(*last) < LastUsedGranularity {
		return
	}
	// A failure to record the use must not fail the request it belongs to.
	_, _ = db.Q(ctx, s.pool).Exec(ctx, `UPDATE tokens SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at <= $3)`,
		id, now, now.Add(-LastUsedGranularity))
}

// DeleteOldTokens removes up to limit tokens revoked or expired before
// cutoff and returns how many it removed (the retention module calls it).
func (s *Service) DeleteOldTokens(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := db.Q(ctx, s.pool).Exec(ctx, `DELETE FROM tokens WHERE id IN (
		SELECT id FROM tokens WHERE revoked_at < $1 OR expires_at < $1 LIMIT $2)`, cutoff, limit)
	if err != nil {
		return 0, fmt.Errorf("delete old tokens: %w", err)
	}
	return tag.RowsAffected(), nil
}
