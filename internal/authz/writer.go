package authz

import (
	"context"
	"time"
)

// Writer is authz's raw writes: grants created and revoked and the audit
// log purged without any right decided. A signature that takes a Writer
// says by its type that its caller decided the right already (the grant
// use cases of admin, retention's schedule, the example world's setup).
// Only internal/modules makes one, at wiring (README.md#architecture).
type Writer struct{ s *Service }

// NewWriter returns the raw writer of s. Outside tests, only the wiring
// (internal/modules) calls it.
func NewWriter(s *Service) *Writer { return &Writer{s: s} }

// RevokeGrant sets revoked_at of grant id (once; a second revoke
// returns the grant unchanged).
func (w *Writer) RevokeGrant(ctx context.Context, id string) (Grant, error) {
	return w.s.st.RevokeGrant(ctx, id)
}

// RevokeGroupGrants revokes every live grant of group groupID
// (when the group is deleted).
func (w *Writer) RevokeGroupGrants(ctx context.Context, groupID string) error {
	return w.s.st.RevokeGroupGrants(ctx, groupID)
}

// DeleteOldAudit removes up to limit audit rows last seen before cutoff and
// returns how many it removed (the retention module calls it).
func (w *Writer) DeleteOldAudit(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return w.s.st.DeleteOldAudit(ctx, cutoff, limit)
}
