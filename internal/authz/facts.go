package authz

import "context"

// The facts below are reads for the neighbouring modules (admin's grant
// and group use cases, which decide first). They decide no right.

// GetGrant returns the grant with id, or ErrGrantNotFound.
func (s *Service) GetGrant(ctx context.Context, id string) (Grant, error) {
	return s.st.GetGrant(ctx, id)
}

// GroupTargets returns, the spaces and channels named by the
// live grants (not revoked, not expired) of group groupID, each once.
func (s *Service) GroupTargets(ctx context.Context, groupID string) (spaces, channels []string, err error) {
	return s.st.GroupTargets(ctx, groupID)
}

// AuditRows returns the audit rows of actor (all actors when empty).
func (s *Service) AuditRows(ctx context.Context, actorID string) ([]AuditRow, error) {
	return s.st.AuditRows(ctx, actorID)
}
