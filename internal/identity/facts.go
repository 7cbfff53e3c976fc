package identity

import "context"

// The facts below are reads for the neighbouring modules: who a principal,
// group or token is. They decide no right; the modules that show them to a
// person (admin, the faces through a use case) decide first.

// GetGroup returns the live group with id and its members, or
// ErrGroupNotFound.
func (s *Service) GetGroup(ctx context.Context, id string) (Group, error) {
	return s.st.GetGroup(ctx, id)
}

// Get returns the principal with id, or ErrNotFound.
func (s *Service) Get(ctx context.Context, id string) (Principal, error) {
	return s.st.Get(ctx, id)
}

// ByHandle returns the principal with handle h, or ErrNotFound.
func (s *Service) ByHandle(ctx context.Context, h string) (Principal, error) {
	return s.st.ByHandle(ctx, h)
}

// GetMany returns the principals with the given ids in one statement, keyed
// by id; unknown ids are absent from the map. Dataloaders call it.
func (s *Service) GetMany(ctx context.Context, idList []string) (map[string]Principal, error) {
	return s.st.GetMany(ctx, idList)
}

// ByHandles returns the principals with the given handles in one
// statement, keyed by handle; unknown handles are absent.
func (s *Service) ByHandles(ctx context.Context, handles []string) (map[string]Principal, error) {
	return s.st.ByHandles(ctx, handles)
}

// ListPrincipals returns up to limit principals with ids after the cursor
// after (empty: from the start), in id order (ids are time-ordered, so this
// is creation order). next is the cursor of the following page, empty when
// this page is the last.
func (s *Service) ListPrincipals(ctx context.Context, after string, limit int) (list []Principal, next string, err error) {
	return s.st.ListPrincipals(ctx, after, limit)
}

// HasOwner reports whether an active owner exists.
func (s *Service) HasOwner(ctx context.Context) (bool, error) {
	return s.st.HasOwner(ctx)
}

// CountPrincipals returns how many principals exist.
func (s *Service) CountPrincipals(ctx context.Context) (int, error) {
	return s.st.CountPrincipals(ctx)
}

// ListTokens returns the tokens of principal id, newest first, revoked and
// expired ones included (so that an owner sees what was issued).
func (s *Service) ListTokens(ctx context.Context, principalID string) ([]TokenInfo, error) {
	return s.st.ListTokens(ctx, principalID)
}
