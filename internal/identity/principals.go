package identity

import (
	"context"
	"net/mail"
	"strings"

	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// MaxDisplayName is the longest display name in characters.
const MaxDisplayName = 80

// validEmail accepts a plain address (no display name part) of at most 254
// bytes.
func validEmail(e string) bool {
	if len(e) > 254 || strings.ContainsAny(e, " <>") {
		return false
	}
	a, err := mail.ParseAddress(e)
	return err == nil && a.Address == e
}

// CheckNew validates np without storing it: handle, kind, display name,
// e-mail and owner flag, each with its field pointer.
func CheckNew(np NewPrincipal) error {
	var fields []problem.FieldError
	if !ValidHandle(np.Handle) {
		fields = append(fields, problem.FieldError{Pointer: "/handle", Code: "invalid_format", Detail: "lowercase letters, digits, - and _, 2 to 32 characters, starting with a letter or digit"})
	}
	switch np.Kind {
	case KindUser, KindAgent, KindApp:
	default:
		fields = append(fields, problem.FieldError{Pointer: "/kind", Code: "invalid_enum"})
	}
	if !text.Line(np.DisplayName, 1, MaxDisplayName) {
		fields = append(fields, problem.FieldError{Pointer: "/display_name", Code: "invalid_format", Detail: "1 to 80 characters without surrounding spaces or control characters"})
	}
	if np.Email != "" {
		if np.Kind != KindUser {
			fields = append(fields, problem.FieldError{Pointer: "/email", Code: "not_allowed", Detail: "only people have an e-mail address"})
		} else if !validEmail(np.Email) {
			fields = append(fields, problem.FieldError{Pointer: "/email", Code: "invalid_format"})
		}
	}
	if np.IsOwner && np.Kind != KindUser {
		fields = append(fields, problem.FieldError{Pointer: "/is_owner", Code: "not_allowed", Detail: "only people own the instance"})
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}

// PrincipalPatch is a change of a principal; nil members stay as they are.
type PrincipalPatch struct {
	DisplayName *string
	// Email: an empty string removes the address.
	Email   *string
	Status  *Status
	IsOwner *bool
}

// Empty reports whether the patch changes nothing.
func (p PrincipalPatch) Empty() bool {
	return p.DisplayName == nil && p.Email == nil && p.Status == nil && p.IsOwner == nil
}

// Check validates the patch for principal cur.
func (p PrincipalPatch) Check(cur Principal) error {
	var fields []problem.FieldError
	if p.DisplayName != nil && !text.Line(*p.DisplayName, 1, MaxDisplayName) {
		fields = append(fields, problem.FieldError{Pointer: "/display_name", Code: "invalid_format", Detail: "1 to 80 characters without surrounding spaces or control characters"})
	}
	if p.Email != nil && *p.Email != "" {
		if cur.Kind != KindUser {
			fields = append(fields, problem.FieldError{Pointer: "/email", Code: "not_allowed", Detail: "only people have an e-mail address"})
		} else if !validEmail(*p.Email) {
			fields = append(fields, problem.FieldError{Pointer: "/email", Code: "invalid_format"})
		}
	}
	if p.Status != nil && *p.Status != StatusActive && *p.Status != StatusDisabled {
		fields = append(fields, problem.FieldError{Pointer: "/status", Code: "invalid_enum", Detail: "active or disabled"})
	}
	if p.IsOwner != nil && *p.IsOwner && cur.Kind != KindUser {
		fields = append(fields, problem.FieldError{Pointer: "/is_owner", Code: "not_allowed", Detail: "only people own the instance"})
	}
	if len(fields) > 0 {
		return problem.Invalid(fields...)
	}
	return nil
}

// UpdatePrincipal applies patch to principal id in the transaction of ctx
// and returns the principal as it is then. It takes the owners' rows first (FOR UPDATE), so
// that two concurrent demotions cannot both pass the last-owner rule: the
// last active owner can be neither demoted nor disabled (409 conflict,
// reason last_owner). ErrNotFound for an unknown id.
func (w *Writer) UpdatePrincipal(ctx context.Context, id string, patch PrincipalPatch) (before, after Principal, err error) {
	s := w.s
	if !ids.Valid(id) {
		return Principal{}, Principal{}, ErrNotFound
	}
	owners, err := s.st.lockOwners(ctx)
	if err != nil {
		return Principal{}, Principal{}, err
	}
	cur, err := s.st.lockPrincipal(ctx, id)
	if err != nil {
		return Principal{}, Principal{}, err
	}
	if err := patch.Check(cur); err != nil {
		return Principal{}, Principal{}, err
	}
	next := cur
	if patch.DisplayName != nil {
		next.DisplayName = *patch.DisplayName
	}
	if patch.Email != nil {
		next.Email = *patch.Email
	}
	if patch.Status != nil {
		next.Status = *patch.Status
	}
	if patch.IsOwner != nil {
		next.IsOwner = *patch.IsOwner
	}
	if cur.Owner() && !next.Owner() && len(owners) == 1 && owners[0] == cur.ID {
		return Principal{}, Principal{}, problem.Newf(problem.Conflict, "last_owner", "the last active owner can be neither demoted nor disabled")
	}
	if err := s.st.writePrincipal(ctx, next); err != nil {
		return Principal{}, Principal{}, err
	}
	return cur, next, nil
}
