package admin

import (
	"context"
	"errors"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// Operator is the actor of the command line (bothy admin ...): a local
// operator with access to the database, who acts as an owner. It is not a
// stored principal; the audit log records its actions under the nil UUID.
// Only code running beside the database (never a request) may act as it.
var Operator = identity.Principal{ID: "00000000-0000-0000-0000-000000000000", Kind: identity.KindUser,
	Handle: identity.OperatorHandle, DisplayName: "Operator", Status: identity.StatusActive, IsOwner: true}

// instance is the resource of creates that have no parent.
var instance = authz.Resource{Kind: authz.KindInstance, ID: "instance"}

// MaxTokenLabel is the longest token label in characters.
const MaxTokenLabel = 100

// PrincipalInput describes a principal to create.
type PrincipalInput struct {
	Kind        identity.Kind
	Handle      string
	DisplayName string
	Email       string
	IsOwner     bool
}

// CreatedPrincipal is a new principal with, for agents and apps, their
// first token (the clear text exists only here).
type CreatedPrincipal struct {
	Principal identity.Principal
	Token     *identity.IssuedToken
}

// CreatePrincipal creates a person, agent or app (principal.create: owner).
// Agents and apps get their first token in the same unit of work; people
// sign in with tokens made later. A taken handle answers 409 handle_taken.
func (s *Service) CreatePrincipal(ctx context.Context, actor identity.Principal, in PrincipalInput) (CreatedPrincipal, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.PrincipalCreate, instance); err != nil {
		return CreatedPrincipal{}, err
	}
	np := identity.NewPrincipal{Kind: in.Kind, Handle: in.Handle, DisplayName: in.DisplayName, Email: in.Email, IsOwner: in.IsOwner}
	label := ""
	if in.Kind != identity.KindUser {
		label = "first token"
	}
	return s.create(ctx, np, label)
}

// create stores np and, when tokenLabel is set, a first token for it, in
// one unit of work.
func (s *Service) create(ctx context.Context, np identity.NewPrincipal, tokenLabel string) (CreatedPrincipal, error) {
	if err := identity.CheckNew(np); err != nil {
		return CreatedPrincipal{}, err
	}
	var out CreatedPrincipal
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		p, err := s.w.Identity.CreatePrincipal(ctx, np)
		if err != nil {
			return err
		}
		out = CreatedPrincipal{Principal: p}
		if tokenLabel != "" {
			tok, err := s.w.Identity.CreateToken(ctx, p, tokenLabel, s.opts.TokenTTL)
			if err != nil {
				return err
			}
			out.Token = &tok
		}
		return nil
	})
	if err != nil {
		return CreatedPrincipal{}, problem.From("admin.create", err)
	}
	return out, nil
}

// CreateOwner is the bootstrap of an installation: it creates an active
// owner and a session token for them, without an acting principal. Only
// the command line calls it (it is how the first owner comes to exist); it
// is audited under the Operator.
func (s *Service) CreateOwner(ctx context.Context, handle, displayName, email string) (CreatedPrincipal, error) {
	ctx = authz.Unmetered(ctx)
	if _, _, err := s.authz.Authorize(ctx, Operator, authz.PrincipalCreate, instance); err != nil {
		return CreatedPrincipal{}, err
	}
	np := identity.NewPrincipal{Kind: identity.KindUser, Handle: handle, DisplayName: displayName, Email: email, IsOwner: true}
	return s.create(ctx, np, "created by bothy admin create-owner")
}

// UpdatePrincipal changes display name, e-mail, status (active or
// disabled) or owner flag of principal id (principal.update: owner). The
// last active owner can be neither demoted nor disabled (409 last_owner).
// A disabled principal's tokens answer 401 from the next request on, its
// waiting long polls are woken to answer, and the runtime is told.
func (s *Service) UpdatePrincipal(ctx context.Context, actor identity.Principal, id string, patch identity.PrincipalPatch) (identity.Principal, error) {
	return s.updatePrincipal(ctx, actor, id, patch, nil)
}

// ReasonProviderRefused is the audit reason of a disable the server made
// by itself: the identity provider refused the person at a recheck.
const ReasonProviderRefused = "provider_refused"

// DisableRefused disables person id because the organisation's identity
// provider refused them at a recheck of their sign-in (a leaver). It is
// an owner's disable, through the same path: decided and audited as
// principal.update, under the Operator (no person asked) with the reason
// provider_refused; tokens answer 401, streams wake, runs lose trigger,
// approvals and run tokens end with the runs. In the same unit of work it
// revokes the person's sign-in sessions, so a failure changes nothing and
// the next recheck asks again. An owner re-enables the person as after
// any disable. The last active owner is not disabled (last_owner, as for
// an owner's disable; only their sessions are revoked): the provider's
// word must not lock every owner out of the installation.
func (s *Service) DisableRefused(ctx context.Context, id string) error {
	ctx = authz.WithAuditReason(authz.Unmetered(ctx), ReasonProviderRefused)
	disabled := identity.StatusDisabled
	revoke := func(ctx context.Context) error {
		_, err := s.w.Identity.RevokeSessions(ctx, id)
		return err
	}
	_, err := s.updatePrincipal(ctx, Operator, id, identity.PrincipalPatch{Status: &disabled}, revoke)
	var pe *problem.Error
	if errors.As(err, &pe) && pe.Reason == "last_owner" {
		if s.opts.Log != nil {
			s.opts.Log.ErrorContext(ctx, "the identity provider refused the last active owner: their sign-in sessions are revoked, the person stays active", "principal_id", id)
		}
		return s.db.InTx(ctx, revoke)
	}
	return err
}

// updatePrincipal is UpdatePrincipal; also, when set, runs in its unit
// of work after the change.
func (s *Service) updatePrincipal(ctx context.Context, actor identity.Principal, id string, patch identity.PrincipalPatch, also func(ctx context.Context) error) (identity.Principal, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.PrincipalUpdate, authz.Resource{Kind: authz.KindPrincipal, ID: id}); err != nil {
		return identity.Principal{}, err
	}
	var before, after identity.Principal
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		var err error
		if before, after, err = s.w.Identity.UpdatePrincipal(ctx, id, patch); err != nil {
			return err
		}
		if also != nil {
			if err := also(ctx); err != nil {
				return err
			}
		}
		if before.Active() && !after.Active() || before.IsOwner != after.IsOwner {
			// Wake every replica's waiting long polls and subscriptions,
			// so that a poll of this principal re-checks its token and
			// answers, and a subscription decides its next event with the
			// principal as it is now.
			return s.events.WakeStreams(ctx)
		}
		return nil
	})
	if errors.Is(err, identity.ErrNotFound) {
		return identity.Principal{}, problem.New(problem.NotFound, "")
	}
	if err != nil {
		return identity.Principal{}, problem.From("admin.updatePrincipal", err)
	}
	if (before.Active() && !after.Active()) || (before.Owner() && !after.Owner()) {
		s.accessLost(ctx, id)
	}
	return after, nil
}

// PrincipalPage is a page of principals.
type PrincipalPage struct {
	Principals []identity.Principal
	// NextAfter is the cursor of the next page; empty on the last.
	NextAfter string
}

// ListPrincipals lists people, agents and apps in creation order
// (principal.list: owner), limit per page (nil: the default).
func (s *Service) ListPrincipals(ctx context.Context, actor identity.Principal, after string, limitArg *int) (PrincipalPage, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.PrincipalList, instance); err != nil {
		return PrincipalPage{}, err
	}
	if after != "" && !ids.Valid(after) {
		return PrincipalPage{}, problem.Invalid(problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
	}
	limit := s.opts.PrincipalListDefault
	if limitArg != nil {
		limit = *limitArg
	}
	if limit < 1 || limit > s.opts.PrincipalListMax {
		return PrincipalPage{}, problem.Invalid(problem.FieldError{Pointer: "limit", Code: "out_of_range", Detail: "must lie between 1 and admin.principal_list_limit_max"})
	}
	list, next, err := s.ident.ListPrincipals(ctx, after, limit)
	if err != nil {
		return PrincipalPage{}, problem.Internal("admin.listPrincipals", err)
	}
	return PrincipalPage{Principals: list, NextAfter: next}, nil
}

// PrincipalByHandle returns the principal with handle h for the command
// line (which names principals by handle).
func (s *Service) PrincipalByHandle(ctx context.Context, h string) (identity.Principal, error) {
	return s.ident.ByHandle(ctx, h)
}

func checkLabel(label string) error {
	if !text.Line(label, 0, MaxTokenLabel) {
		return problem.Invalid(problem.FieldError{Pointer: "/label", Code: "invalid_format", Detail: "at most 100 characters without surrounding spaces or control characters"})
	}
	return nil
}

// CreateToken issues a new token for principal id (token.create: a person
// for themselves, an owner for anybody). ttl nil takes token.default_ttl;
// zero means no expiry; below zero is refused. The clear text is in the
// answer only.
func (s *Service) CreateToken(ctx context.Context, actor identity.Principal, principalID, label string, ttl *time.Duration) (identity.IssuedToken, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.TokenCreate, authz.Resource{Kind: authz.KindPrincipal, ID: principalID}); err != nil {
		return identity.IssuedToken{}, err
	}
	if err := checkLabel(label); err != nil {
		return identity.IssuedToken{}, err
	}
	life := s.opts.TokenTTL
	if ttl != nil {
		if err := identity.ValidTTL(*ttl, "/ttl"); err != nil {
			return identity.IssuedToken{}, err
		}
		life = *ttl
	}
	p, err := s.ident.Get(ctx, principalID)
	if err != nil {
		return identity.IssuedToken{}, problem.Internal("admin.createToken", err)
	}
	tok, err := s.w.Identity.CreateToken(ctx, p, label, life)
	if err != nil {
		return identity.IssuedToken{}, problem.From("admin.createToken", err)
	}
	return tok, nil
}

// ListTokens lists the tokens of principal id without their secrets
// (token.list: a person their own, an owner anybody's).
func (s *Service) ListTokens(ctx context.Context, actor identity.Principal, principalID string) ([]identity.TokenInfo, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.TokenList, authz.Resource{Kind: authz.KindPrincipal, ID: principalID}); err != nil {
		return nil, err
	}
	list, err := s.ident.ListTokens(ctx, principalID)
	if err != nil {
		return nil, problem.Internal("admin.listTokens", err)
	}
	return list, nil
}

// TokenPageMax is the most tokens one page of a token list holds, and the
// page size when none is asked for.
const TokenPageMax = 100

// PageTokens returns the page of list (newest first, as ListTokens answers)
// behind the token with id after ("" from the start), at most first
// tokens (0 takes TokenPageMax), and whether tokens follow it. A principal
// holds few tokens, so the page is cut from the whole list.
//
// Errors: first outside 0 to TokenPageMax (pointer "first", out_of_range);
// after naming no token of list (pointer "after", invalid_cursor).
func PageTokens(list []identity.TokenInfo, after string, first int) ([]identity.TokenInfo, bool, error) {
	if first == 0 {
		first = TokenPageMax
	}
	if first < 1 || first > TokenPageMax {
		return nil, false, problem.Invalid(problem.FieldError{Pointer: "first", Code: "out_of_range", Detail: "must lie between 1 and 100"})
	}
	start := 0
	if after != "" {
		start = -1
		for i, t := range list {
			if t.ID == after {
				start = i + 1
			}
		}
		if start < 0 {
			return nil, false, problem.Invalid(problem.FieldError{Pointer: "after", Code: "invalid_cursor"})
		}
	}
	end := min(start+first, len(list))
	return list[start:end], end < len(list), nil
}

// RevokeToken revokes token id (token.revoke: its holder if a person, or an
// owner). Someone else's token is 404, like a missing one. Waiting long
// polls are woken so that one holding this token answers 401.
func (s *Service) RevokeToken(ctx context.Context, actor identity.Principal, id string) (identity.TokenInfo, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.TokenRevoke, authz.Resource{Kind: authz.KindToken, ID: id}); err != nil {
		return identity.TokenInfo{}, err
	}
	var out identity.TokenInfo
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		var err error
		if out, err = s.w.Identity.RevokeTokenByID(ctx, id); err != nil {
			return err
		}
		return s.events.WakeStreams(ctx)
	})
	if err != nil {
		return identity.TokenInfo{}, problem.From("admin.revokeToken", err)
	}
	return out, nil
}
