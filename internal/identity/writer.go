package identity

import (
	"context"
	"time"
)

// Writer is identity's raw writes: principals, groups, members and tokens
// created, changed, revoked and purged without any right decided. A
// signature that takes a Writer says by its type that its caller decided
// the right already (admin's owner check, the runs module's holder check,
// retention's schedule, the example world's setup). Only internal/modules
// makes one, at wiring (README.md#architecture).
type Writer struct{ s *Service }

// NewWriter returns the raw writer of s. Outside tests, only the wiring
// (internal/modules) calls it.
func NewWriter(s *Service) *Writer { return &Writer{s: s} }

// DeleteGroup marks group id deleted and removes its members. The
// row stays so that grants that named it remain in the history; the caller
// revokes those grants in the same unit of work.
func (w *Writer) DeleteGroup(ctx context.Context, id string) error {
	return w.s.st.DeleteGroup(ctx, id)
}

// RemoveMember takes principalID out of group id (removing a
// non-member changes nothing); a deleted, unknown or malformed group is
// ErrGroupNotFound.
func (w *Writer) RemoveMember(ctx context.Context, id, principalID string) error {
	return w.s.st.RemoveMember(ctx, id, principalID)
}

// SetStatus changes the lifecycle state of principal id.
func (w *Writer) SetStatus(ctx context.Context, id string, st Status) error {
	return w.s.st.SetStatus(ctx, id, st)
}

// RevokeToken revokes the token with the given clear text. It returns
// ErrNotFound when no such token exists.
func (w *Writer) RevokeToken(ctx context.Context, tok string) error {
	return w.s.st.RevokeToken(ctx, tok)
}

// RevokeTokenByID revokes the token with id and returns it. Revoking a
// revoked token answers it unchanged.
func (w *Writer) RevokeTokenByID(ctx context.Context, id string) (TokenInfo, error) {
	return w.s.st.RevokeTokenByID(ctx, id)
}

// DeleteOldTokens removes up to limit tokens revoked or expired before
// cutoff, and run tokens minted before cutoff whose run is no longer
// active (they authenticate no more), and returns how many it removed
// (the retention module calls it).
func (w *Writer) DeleteOldTokens(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	return w.s.st.DeleteOldTokens(ctx, cutoff, limit)
}
