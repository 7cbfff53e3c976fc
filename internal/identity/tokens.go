package identity

import (
	"context"
	"time"

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

// GetToken returns the token with id (without its secret), or ErrNotFound.
func (s *Service) GetToken(ctx context.Context, id string) (TokenInfo, error) {
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
