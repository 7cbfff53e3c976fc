package admin

import (
	"context"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// CapabilitiesPatch changes an agent's capabilities; nil members stay.
type CapabilitiesPatch struct {
	FilesOut *bool
}

// SetCapabilities changes the capabilities of agent id
// (principal.capabilities: owners only, audited) and returns the agent
// with its capabilities as they are now. A person or an app answers
// validation_failed: capabilities widen what an agent may do, and people
// and apps have nothing to widen.
func (s *Service) SetCapabilities(ctx context.Context, actor identity.Principal, id string, patch CapabilitiesPatch) (identity.Principal, identity.Capabilities, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.PrincipalCapabilities, authz.Resource{Kind: authz.KindPrincipal, ID: id}); err != nil {
		return identity.Principal{}, identity.Capabilities{}, err
	}
	p, err := s.ident.Get(ctx, id)
	if err != nil {
		return identity.Principal{}, identity.Capabilities{}, problem.From("admin.setCapabilities", err)
	}
	if p.Kind != identity.KindAgent {
		return identity.Principal{}, identity.Capabilities{}, problem.Invalid(problem.FieldError{Pointer: "principal_id",
			Code: "not_an_agent", Detail: "capabilities are an agent's"})
	}
	var out identity.Capabilities
	err = s.db.InTx(ctx, func(ctx context.Context) error {
		cur, err := s.ident.CapabilitiesOf(ctx, id)
		if err != nil {
			return err
		}
		if patch.FilesOut != nil {
			cur.FilesOut = *patch.FilesOut
		}
		out = cur
		return s.w.Identity.SetCapabilities(ctx, id, cur)
	})
	if err != nil {
		return identity.Principal{}, identity.Capabilities{}, problem.From("admin.setCapabilities", err)
	}
	return p, out, nil
}
