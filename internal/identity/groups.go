package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/platform/text"
)

// MaxGroupName is the longest group name in characters.
const MaxGroupName = 80

// Group is a named set of people that grants can name.
type Group struct {
	ID        string
	Name      string
	CreatedAt time.Time
	// Members are the ids of the people in the group, in id order.
	Members []string
}

// ErrGroupNotFound is returned for an unknown or deleted group.
var ErrGroupNotFound = fmt.Errorf("identity: group %w", problem.ErrMissing)

func checkGroupName(name string) error {
	if !text.Line(name, 1, MaxGroupName) {
		return problem.Invalid(problem.FieldError{Pointer: "/name", Code: "invalid_format", Detail: "1 to 80 characters without surrounding spaces or control characters"})
	}
	return nil
}

func nameTaken(err error) error {
	if db.IsUniqueViolation(err, "") {
		return problem.Newf(problem.Conflict, "name_taken", "the name is taken")
	}
	return err
}

// CreateGroup stores a new, empty group.
func (w *Writer) CreateGroup(ctx context.Context, name string) (Group, error) {
	s := w.s
	if err := checkGroupName(name); err != nil {
		return Group{}, err
	}
	return s.st.insertGroup(ctx, name)
}

// RenameGroup renames the live group id.
func (w *Writer) RenameGroup(ctx context.Context, id, name string) error {
	s := w.s
	if err := checkGroupName(name); err != nil {
		return err
	}
	return s.st.renameGroup(ctx, id, name)
}

// AddMember puts person principalID into group id (adding twice
// changes nothing). Only people can be members; a deleted, unknown or
// malformed group is ErrGroupNotFound and nothing is written.
func (w *Writer) AddMember(ctx context.Context, id, principalID string) error {
	s := w.s
	p, err := s.st.Get(ctx, principalID)
	if errors.Is(err, ErrNotFound) {
		return problem.Invalid(problem.FieldError{Pointer: "/principal_id", Code: "invalid_reference"})
	}
	if err != nil {
		return err
	}
	if p.Kind != KindUser {
		return problem.Invalid(problem.FieldError{Pointer: "/principal_id", Code: "not_allowed", Detail: "only people can be members of a group"})
	}
	return s.st.insertMember(ctx, id, principalID)
}
