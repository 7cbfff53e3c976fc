package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TokenSource says who made a token: an owner (or the command line), or a
// sign-in at the organisation's identity provider. A provider's refusal at
// a recheck ends the sessions of source oidc only.
type TokenSource string

// The token sources.
const (
	// SourceOwner is a token an owner created (admin tokens, bothy admin).
	SourceOwner TokenSource = "owner"
	// SourceOIDC is a session of a sign-in through OIDC.
	SourceOIDC TokenSource = "oidc"
)

// PrincipalByIdentity returns the person linked to the account subject at
// the provider issuer, or ErrNotFound.
func (s *Service) PrincipalByIdentity(ctx context.Context, issuer, subject string) (Principal, error) {
	return s.st.principalByIdentity(ctx, issuer, subject)
}

// PeopleByEmail returns the people (not deleted) whose e-mail address is
// email, compared without case, in a fixed order.
func (s *Service) PeopleByEmail(ctx context.Context, email string) ([]Principal, error) {
	return s.st.peopleByEmail(ctx, email)
}

// LinkIdentity records that the account subject at issuer is principalID,
// so that later sign-ins find the person by the account alone.
func (w *Writer) LinkIdentity(ctx context.Context, issuer, subject, principalID string) error {
	return w.s.st.insertIdentity(ctx, issuer, subject, principalID, w.s.st.clock.Now().Truncate(time.Microsecond))
}

// CreateSession issues a session token of source oidc for the person p,
// valid for ttl (which must be positive: a sign-in's session always ends).
func (w *Writer) CreateSession(ctx context.Context, p Principal, label string, ttl time.Duration) (IssuedToken, error) {
	if p.Kind != KindUser {
		return IssuedToken{}, errors.New("identity: only people sign in")
	}
	if ttl <= 0 {
		return IssuedToken{}, fmt.Errorf("identity: a session needs a positive lifetime, not %s", ttl)
	}
	it, now, err := w.s.newToken(TokenSession, PrefixSession, label)
	if err != nil {
		return IssuedToken{}, err
	}
	e := now.Add(ttl)
	it.ExpiresAt = &e
	if err := w.s.st.insertSession(ctx, it, p.ID, now, e); err != nil {
		return IssuedToken{}, err
	}
	return it, nil
}

// FreeHandle returns base, or base with the smallest number from 2 that
// makes it a handle no principal has, for a person a sign-in creates. base
// is cut and cleaned to the handle rules first.
func (s *Service) FreeHandle(ctx context.Context, base string) (string, error) {
	base = cleanHandle(base)
	for n := 1; n < 1000; n++ {
		h := base
		if n > 1 {
			suffix := fmt.Sprint(n)
			h = base[:min(len(base), 32-len(suffix))] + suffix
		}
		if Reserved(h) {
			continue
		}
		if _, err := s.st.ByHandle(ctx, h); errors.Is(err, ErrNotFound) {
			return h, nil
		} else if err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("identity: no free handle from %q", base)
}

// cleanHandle makes a handle of the local part of an e-mail address:
// lower case, characters outside the handle's alphabet replaced by "-",
// at most 32 characters, and at least two.
func cleanHandle(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	h := strings.TrimLeft(b.String(), "_-")
	if len(h) > 32 {
		h = h[:32]
	}
	for len(h) < 2 {
		h += "0"
	}
	return h
}
