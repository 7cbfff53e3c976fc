package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

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

// CreateToken issues a new token for principal p.
// The token has 32 random bytes after its kind prefix and is stored only as
// a SHA-256 hash. ttl of zero means no expiry; a negative ttl is a
// validation error.
func (s *Service) CreateToken(ctx context.Context, p Principal, label string, ttl time.Duration) (IssuedToken, error) {
	if err := ValidTTL(ttl, "/ttl"); err != nil {
		return IssuedToken{}, err
	}
	kind, prefix := tokenKind(p.Kind)
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return IssuedToken{}, fmt.Errorf("token randomness: %w", err)
	}
	tok := prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.clock.Now().Truncate(time.Microsecond)
	it := IssuedToken{ID: ids.New(), Token: tok, Kind: kind, Label: label, CreatedAt: now.UTC()}
	var expires any
	if ttl > 0 {
		e := now.Add(ttl)
		it.ExpiresAt = &e
		expires = e
	}
	if err := s.insertToken(ctx, it, p.ID, now, expires); err != nil {
		return IssuedToken{}, err
	}
	return it, nil
}
