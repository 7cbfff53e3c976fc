package admin

import (
	"context"
	"errors"
	"fmt"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
)

// Path implements authz.Source for the instance-level kinds: the instance
// itself, principals (seen by every active principal, theirs to act on
// themselves), groups, and tokens (seen only by their holder and owners,
// so that someone else's token is 404 like a missing one).
func (s *Service) Path(ctx context.Context, kind authz.ResourceKind, id string) (authz.Path, error) {
	switch kind {
	case authz.KindInstance:
		return authz.Path{Exists: true, Global: true}, nil
	case authz.KindPrincipal:
		p, err := s.ident.Get(ctx, id)
		if errors.Is(err, identity.ErrNotFound) {
			return authz.Path{}, nil
		}
		if err != nil {
			return authz.Path{}, err
		}
		return authz.Path{Exists: true, Global: true, OwnerID: p.ID}, nil
	case authz.KindGroup:
		_, err := s.ident.GetGroup(ctx, id)
		if errors.Is(err, identity.ErrGroupNotFound) {
			return authz.Path{}, nil
		}
		if err != nil {
			return authz.Path{}, err
		}
		return authz.Path{Exists: true, Global: true}, nil
	case authz.KindToken:
		t, err := s.ident.GetToken(ctx, id)
		if errors.Is(err, identity.ErrNotFound) {
			return authz.Path{}, nil
		}
		if err != nil {
			return authz.Path{}, err
		}
		return authz.Path{Exists: true, Global: true, Private: true, OwnerID: t.PrincipalID}, nil
	default:
		// The other kinds have their paths in their own modules.
	}
	return authz.Path{}, fmt.Errorf("admin: no paths of kind %s", kind)
}
