package authz

import (
	"context"
	"errors"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/platform/problem"
)

// SubjectKind says whether a grant's subject is a principal or a group (the
// GraphQL enum SubjectKind binds to it).
type SubjectKind string

// The subject kinds.
const (
	SubjectPrincipal SubjectKind = "principal"
	SubjectGroup     SubjectKind = "group"
)

// Grant is a stored grant.
type Grant struct {
	ID          string
	SubjectID   string
	SubjectKind SubjectKind
	TargetKind  ResourceKind
	TargetID    string
	Level       Level
	ExpiresAt   *time.Time
	CreatedBy   string
	CreatedAt   time.Time
	RevokedAt   *time.Time
}

// NewGrant describes a grant to store.
type NewGrant struct {
	SubjectID   string
	SubjectKind SubjectKind
	// SubjectIsPersonOrGroup is false for agents and apps, which can hold at
	// most write.
	SubjectIsPersonOrGroup bool
	TargetKind             ResourceKind
	TargetID               string
	Level                  Level
	ExpiresAt              *time.Time
	CreatedBy              string
}

// ErrGrantNotFound is returned for an unknown grant.
var ErrGrantNotFound = fmt.Errorf("authz: grant %w", problem.ErrMissing)

// CreateGrant stores g. Agents and apps can hold at most write;
// a higher level is a validation error on /level.
func (w *Writer) CreateGrant(ctx context.Context, g NewGrant) (Grant, error) {
	s := w.s
	if !g.SubjectIsPersonOrGroup && g.Level > Write {
		return Grant{}, problem.Invalid(problem.FieldError{Pointer: "/level", Code: "invalid_value", Detail: "agents and apps can hold at most write"})
	}
	if g.Level < Read {
		return Grant{}, problem.Invalid(problem.FieldError{Pointer: "/level", Code: "invalid_enum"})
	}
	return s.st.insertGrant(ctx, g)
}

// GrantPath is the path of a grant: the path of its target, so that only
// readers of the target learn that the grant exists.
func (s *Service) GrantPath(ctx context.Context, id string) (Path, error) {
	g, err := s.st.GetGrant(ctx, id)
	if errors.Is(err, ErrGrantNotFound) {
		return Path{Kind: KindGrant, ID: id}, nil
	}
	if err != nil {
		return Path{}, err
	}
	p, err := s.PathOf(ctx, Resource{Kind: g.TargetKind, ID: g.TargetID})
	if err != nil {
		return Path{}, err
	}
	p.Kind, p.ID = KindGrant, id
	return p, nil
}

// Path implements Source for grants.
func (s *Service) Path(ctx context.Context, kind ResourceKind, id string) (Path, error) {
	return s.GrantPath(ctx, id)
}
