package signin

import (
	"context"
	"errors"
	"slices"
	"strings"

	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// person returns the person a verified sign-in stands for: the one linked
// to the account (issuer, subject); else, at the first sign-in, the one
// person with the verified address, then linked; else, with CreatePeople,
// a new person of an allowed domain. A person who is not active is
// refused as an unknown one is, so that a sign-in never tells who exists.
func (s *Service) person(ctx context.Context, c claims) (identity.Principal, error) {
	p, err := s.ident.PrincipalByIdentity(ctx, c.issuer, c.subject)
	switch {
	case err == nil:
		if !p.Active() {
			return identity.Principal{}, refusedPerson()
		}
		return p, nil
	case !errors.Is(err, identity.ErrNotFound):
		return identity.Principal{}, problem.Internal("signin.person: find by identity", err)
	}
	email := strings.TrimSpace(c.email)
	if !allowed(email, c.verified, s.cfg.AllowedDomains) {
		return identity.Principal{}, problem.Newf(problem.Forbidden, "email_not_allowed",
			"sign-in needs an e-mail address the identity provider has verified, of a domain this server allows")
	}
	people, err := s.ident.PeopleByEmail(ctx, email)
	if err != nil {
		return identity.Principal{}, problem.Internal("signin.person: find by e-mail", err)
	}
	switch len(people) {
	case 0:
		if !s.cfg.CreatePeople {
			return identity.Principal{}, refusedPerson()
		}
		return s.create(ctx, c, email)
	case 1:
		if !people[0].Active() {
			return identity.Principal{}, refusedPerson()
		}
		if err := s.w.LinkIdentity(ctx, c.issuer, c.subject, people[0].ID); err != nil {
			return identity.Principal{}, problem.Internal("signin.person: link identity", err)
		}
		return people[0], nil
	default:
		return identity.Principal{}, problem.Newf(problem.Conflict, "email_ambiguous",
			"more than one person has this e-mail address: an owner must give each their own before they can sign in")
	}
}

// refusedPerson is the answer for a person this server does not let in:
// unknown, disabled or deleted alike.
func refusedPerson() error {
	return problem.Newf(problem.Forbidden, "person_unknown", "no active person of this server has this account; ask an owner")
}

// create makes a new person for the account: the handle from the
// address's local part (with a number when taken), the display name from
// the token's name claim or the local part, no grants; and links the
// account.
func (s *Service) create(ctx context.Context, c claims, email string) (identity.Principal, error) {
	local, _, _ := strings.Cut(email, "@")
	handle, err := s.ident.FreeHandle(ctx, local)
	if err != nil {
		return identity.Principal{}, problem.Internal("signin.create: find free handle", err)
	}
	name := strings.TrimSpace(c.name)
	if name == "" {
		name = local
	}
	p, err := s.w.CreatePrincipal(ctx, identity.NewPrincipal{Kind: identity.KindUser, Handle: handle, DisplayName: name, Email: email})
	if err != nil {
		return identity.Principal{}, problem.Internal("signin.create: create principal", err)
	}
	if err := s.w.LinkIdentity(ctx, c.issuer, c.subject, p.ID); err != nil {
		return identity.Principal{}, problem.Internal("signin.create: link identity", err)
	}
	s.log.InfoContext(ctx, "sign-in created a person", "principal_id", p.ID)
	return p, nil
}

// allowed reports whether email may sign in: verified by the provider, of
// the form local@domain, and of one of domains (any when domains is empty).
func allowed(email string, verified bool, domains []string) bool {
	local, domain, ok := strings.Cut(email, "@")
	if !verified || !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return false
	}
	return len(domains) == 0 || slices.Contains(domains, strings.ToLower(domain))
}
