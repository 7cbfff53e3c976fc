package identity

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/ids"
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
var ErrGroupNotFound = errors.New("identity: group not found")

// MembershipSQL is the membership relation (group_id, principal_id) as a
// subquery, for a module that must join membership into its own statement:
// authz reads grants to groups with it in the one statement of a decision,
// where a second round trip per decision would cost more than it saves.
// Identity owns group_members; this is the only shape others may use.
const MembershipSQL = `(SELECT group_id, principal_id FROM group_members)`

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
func (s *Service) CreateGroup(ctx context.Context, name string) (Group, error) {
	q := db.Q(ctx, s.pool)
	if err := checkGroupName(name); err != nil {
		return Group{}, err
	}
	g := Group{ID: ids.New(), Name: name, CreatedAt: s.clock.Now().Truncate(time.Microsecond).UTC(), Members: []string{}}
	if _, err := q.Exec(ctx, `INSERT INTO groups (id, name, created_at) VALUES ($1, $2, $3)`, g.ID, g.Name, g.CreatedAt); err != nil {
		return Group{}, nameTaken(fmt.Errorf("create group: %w", err))
	}
	return g, nil
}

// GetGroup returns the live group with id and its members, or
// ErrGroupNotFound.
func (s *Service) GetGroup(ctx context.Context, id string) (Group, error) {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(id) {
		return Group{}, ErrGroupNotFound
	}
	var g Group
	err := q.QueryRow(ctx, `SELECT id::text, name, created_at,
		coalesce((SELECT array_agg(principal_id::text ORDER BY principal_id) FROM group_members WHERE group_id = g.id), '{}')
		FROM groups g WHERE id = $1 AND deleted_at IS NULL`, id).Scan(&g.ID, &g.Name, &g.CreatedAt, &g.Members)
	if errors.Is(err, pgx.ErrNoRows) {
		return Group{}, ErrGroupNotFound
	}
	g.CreatedAt = g.CreatedAt.UTC()
	return g, err
}

// RenameGroup renames the live group id.
func (s *Service) RenameGroup(ctx context.Context, id, name string) error {
	q := db.Q(ctx, s.pool)
	if err := checkGroupName(name); err != nil {
		return err
	}
	tag, err := q.Exec(ctx, `UPDATE groups SET name = $2 WHERE id = $1 AND deleted_at IS NULL`, id, name)
	if err != nil {
		return nameTaken(fmt.Errorf("rename group: %w", err))
	}
	if tag.RowsAffected() == 0 {
		return ErrGroupNotFound
	}
	return nil
}

// DeleteGroup marks group id deleted and removes its members. The
// row stays so that grants that named it remain in the history; the caller
// revokes those grants in the same unit of work.
func (s *Service) DeleteGroup(ctx context.Context, id string) error {
	q := db.Q(ctx, s.pool)
	tag, err := q.Exec(ctx, `UPDATE groups SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL`, id, s.clock.Now())
	if err != nil {
		return fmt.Errorf("delete group: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrGroupNotFound
	}
	if _, err := q.Exec(ctx, `DELETE FROM group_members WHERE group_id = $1`, id); err != nil {
		return fmt.Errorf("delete group members: %w", err)
	}
	return nil
}

// AddMember puts person principalID into group id (adding twice
// changes nothing). Only people can be members.
func (s *Service) AddMember(ctx context.Context, id, principalID string) error {
	q := db.Q(ctx, s.pool)
	p, err := s.Get(ctx, principalID)
	if errors.Is(err, ErrNotFound) {
		return problem.Invalid(problem.FieldError{Pointer: "/principal_id", Code: "invalid_reference"})
	}
	if err != nil {
		return err
	}
	if p.Kind != KindUser {
		return problem.Invalid(problem.FieldError{Pointer: "/principal_id", Code: "not_allowed", Detail: "only people can be members of a group"})
	}
	_, err = q.Exec(ctx, `INSERT INTO group_members (group_id, principal_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, id, principalID)
	if err != nil {
		return fmt.Errorf("add group member: %w", err)
	}
	return nil
}

// RemoveMember takes principalID out of group id (removing a
// non-member changes nothing).
func (s *Service) RemoveMember(ctx context.Context, id, principalID string) error {
	q := db.Q(ctx, s.pool)
	if !ids.Valid(principalID) {
		return nil
	}
	if _, err := q.Exec(ctx, `DELETE FROM group_members WHERE group_id = $1 AND principal_id = $2`, id, principalID); err != nil {
		return fmt.Errorf("remove group member: %w", err)
	}
	return nil
}
