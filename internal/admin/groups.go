package admin

import (
	"context"
	"errors"
	"slices"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// CreateGroup creates an empty group (group.create: owner). A taken name
// answers 409 name_taken.
func (s *Service) CreateGroup(ctx context.Context, actor identity.Principal, name string) (identity.Group, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GroupCreate, instance); err != nil {
		return identity.Group{}, err
	}
	g, err := s.w.Identity.CreateGroup(ctx, name)
	if err != nil {
		return identity.Group{}, problem.From("admin.createGroup", err)
	}
	return g, nil
}

// Group returns group id with its members (group.read: owner).
func (s *Service) Group(ctx context.Context, actor identity.Principal, id string) (identity.Group, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GroupRead, authz.Resource{Kind: authz.KindGroup, ID: id}); err != nil {
		return identity.Group{}, err
	}
	g, err := s.ident.GetGroup(ctx, id)
	if err != nil {
		return identity.Group{}, problem.Internal("admin.group", err)
	}
	return g, nil
}

// RenameGroup renames group id (group.update: owner).
func (s *Service) RenameGroup(ctx context.Context, actor identity.Principal, id, name string) (identity.Group, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GroupUpdate, authz.Resource{Kind: authz.KindGroup, ID: id}); err != nil {
		return identity.Group{}, err
	}
	return s.groupChange(ctx, id, "", func(ctx context.Context) error { return s.w.Identity.RenameGroup(ctx, id, name) })
}

// AddMember puts person principalID into group id (group.member.add:
// owner). The group's grants now reach them: access.changed goes to every
// channel the group has a live grant in.
func (s *Service) AddMember(ctx context.Context, actor identity.Principal, id, principalID string) (identity.Group, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GroupMemberAdd, authz.Resource{Kind: authz.KindGroup, ID: id}); err != nil {
		return identity.Group{}, err
	}
	return s.groupChange(ctx, id, "group.member_added", func(ctx context.Context) error { return s.w.Identity.AddMember(ctx, id, principalID) })
}

// RemoveMember takes principalID out of group id (group.member.remove:
// owner); the runtime learns that they may have lost rights.
func (s *Service) RemoveMember(ctx context.Context, actor identity.Principal, id, principalID string) (identity.Group, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GroupMemberRemove, authz.Resource{Kind: authz.KindGroup, ID: id}); err != nil {
		return identity.Group{}, err
	}
	g, err := s.groupChange(ctx, id, "group.member_removed", func(ctx context.Context) error { return s.w.Identity.RemoveMember(ctx, id, principalID) })
	if err == nil {
		s.accessLost(ctx, principalID)
	}
	return g, err
}

// DeleteGroup deletes group id (group.delete: owner): its live grants are
// revoked and its members removed in one unit of work; the answer is the
// group as it was.
func (s *Service) DeleteGroup(ctx context.Context, actor identity.Principal, id string) (identity.Group, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GroupDelete, authz.Resource{Kind: authz.KindGroup, ID: id}); err != nil {
		return identity.Group{}, err
	}
	var before identity.Group
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		var err error
		if before, err = s.ident.GetGroup(ctx, id); err != nil {
			return err
		}
		if err := s.groupAccessChanged(ctx, id, "group.deleted"); err != nil {
			return err
		}
		if err := s.w.Authz.RevokeGroupGrants(ctx, id); err != nil {
			return err
		}
		return s.w.Identity.DeleteGroup(ctx, id)
	})
	if err != nil {
		return identity.Group{}, groupErr(err)
	}
	s.accessLost(ctx, before.Members...)
	return before, nil
}

func groupErr(err error) error {
	if errors.Is(err, identity.ErrGroupNotFound) {
		return problem.New(problem.NotFound, "")
	}
	return problem.From("admin.groupErr", err)
}

// groupChange runs fn on group id in one unit of work and answers the
// group after it; with change set it emits access.changed in every channel
// the group holds a live grant in.
func (s *Service) groupChange(ctx context.Context, id, change string, fn func(ctx context.Context) error) (identity.Group, error) {
	var out identity.Group
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			return err
		}
		g, err := s.ident.GetGroup(ctx, id)
		if err != nil {
			return err
		}
		out = g
		if change != "" {
			return s.groupAccessChanged(ctx, id, change)
		}
		return nil
	})
	if err != nil {
		return identity.Group{}, groupErr(err)
	}
	return out, nil
}

// groupAccessChanged emits access.changed in every channel reached by a
// live grant of group id (on the channel, or on its space).
func (s *Service) groupAccessChanged(ctx context.Context, id, change string) error {
	spaces, channels, err := s.authz.GroupTargets(ctx, id)
	if err != nil {
		return err
	}
	for _, sp := range spaces {
		more, err := s.chat.ChannelsOfSpace(ctx, sp)
		if err != nil {
			return err
		}
		channels = append(channels, more...)
	}
	slices.Sort(channels)
	channels = slices.Compact(channels)
	evs := make([]events.Event, len(channels))
	for i, c := range channels {
		evs[i] = events.Event{Type: events.AccessChanged, ChannelID: c,
			Payload: map[string]any{"change": change, "target_kind": "group", "target_id": id, "id": id}}
	}
	return s.events.Append(ctx, evs...)
}
