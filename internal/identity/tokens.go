package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
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
	return s.st.getToken(ctx, id)
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
func (w *Writer) CreateToken(ctx context.Context, p Principal, label string, ttl time.Duration) (IssuedToken, error) {
	s := w.s
	if err := ValidTTL(ttl, "/ttl"); err != nil {
		return IssuedToken{}, err
	}
	kind, prefix := tokenKind(p.Kind)
	it, now, err := s.newToken(kind, prefix, label)
	if err != nil {
		return IssuedToken{}, err
	}
	var expires any
	if ttl > 0 {
		e := now.Add(ttl)
		it.ExpiresAt = &e
		expires = e
	}
	if err := s.st.insertToken(ctx, it, p.ID, now, expires); err != nil {
		return IssuedToken{}, err
	}
	return it, nil
}

// newToken draws a token of kind: prefix and 32 random bytes.
func (s *Service) newToken(kind TokenKind, prefix, label string) (IssuedToken, time.Time, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return IssuedToken{}, time.Time{}, fmt.Errorf("token randomness: %w", err)
	}
	tok := prefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := s.st.clock.Now().Truncate(time.Microsecond)
	return IssuedToken{ID: ids.New(), Token: tok, Kind: kind, Label: label, CreatedAt: now.UTC()}, now, nil
}

// IsRunToken reports whether tok has the form of a run token (it says
// nothing of whether it authenticates).
func IsRunToken(tok string) bool { return strings.HasPrefix(tok, PrefixRun) }

// CreateRunToken issues a run token of agent for the run runID and the
// holder that claimed it: a principal it authenticates carries RunID,
// RunThreadID and RunHolder, and it authenticates only while the run is
// active. The runs module decides who may have one (runs.Service.CreateRunToken)
// and calls this after; nothing is checked here but the agent's kind.
//
// Errors: a principal that is not an agent (invalid); a database error.
func (w *Writer) CreateRunToken(ctx context.Context, agent Principal, runID, holder string) (IssuedToken, error) {
	s := w.s
	if agent.Kind != KindAgent {
		return IssuedToken{}, problem.Invalid(problem.FieldError{Pointer: "/runId", Code: "invalid", Detail: "run tokens belong to agents"})
	}
	it, now, err := s.newToken(TokenRun, PrefixRun, "run "+runID)
	if err != nil {
		return IssuedToken{}, err
	}
	if err := s.st.insertBoundToken(ctx, it, agent.ID, now, nil, runID, holder); err != nil {
		return IssuedToken{}, err
	}
	return it, nil
}
