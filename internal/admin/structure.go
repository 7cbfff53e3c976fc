package admin

import (
	"context"
	"errors"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/problem"
)

// checkAgent validates an agent reference at pointer: it must name an
// active agent.
func (s *Service) checkAgent(ctx context.Context, id, pointer string) error {
	p, err := s.ident.Get(ctx, id)
	if err != nil || p.Kind != identity.KindAgent || !p.Active() {
		if err != nil && !errors.Is(err, identity.ErrNotFound) {
			return problem.Internal("admin.checkAgent", err)
		}
		return problem.Invalid(problem.FieldError{Pointer: pointer, Code: "invalid_reference", Detail: "must name an active agent"})
	}
	return nil
}

func spacePayload(sp chat.Space) map[string]any {
	p := map[string]any{"id": sp.ID, "name": sp.Name, "archived": sp.ArchivedAt != nil}
	if sp.DefaultOperatorAgentID != "" {
		p["default_operator_agent_id"] = sp.DefaultOperatorAgentID
	}
	return p
}

func channelPayload(c chat.Channel) map[string]any {
	p := map[string]any{"id": c.ID, "space_id": c.SpaceID, "name": c.Name, "kind": string(c.Kind), "archived": c.Archived(),
		"operator_mode": string(c.OperatorMode)}
	if c.MainThreadID != "" {
		p["main_thread_id"] = c.MainThreadID
	}
	return p
}

// CreateSpace creates a space with an optional default operator agent
// (space.create: owner) and emits space.created, which its readers (owners,
// and later the holders of grants on it) see.
func (s *Service) CreateSpace(ctx context.Context, actor identity.Principal, name, defaultOperator string) (chat.Space, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.SpaceCreate, instance); err != nil {
		return chat.Space{}, err
	}
	if defaultOperator != "" {
		if err := s.checkAgent(ctx, defaultOperator, "/default_operator_agent_id"); err != nil {
			return chat.Space{}, err
		}
	}
	var out chat.Space
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		sp, err := s.w.Chat.CreateSpace(ctx, name, defaultOperator)
		if err != nil {
			return err
		}
		out = sp
		return s.events.Append(ctx, events.Event{Type: events.SpaceCreated, SpaceID: sp.ID, Payload: spacePayload(sp)})
	})
	if err != nil {
		return chat.Space{}, problem.From("admin.createSpace", err)
	}
	return out, nil
}

// SpacePatch is a change of a space; nil members stay.
type SpacePatch struct {
	Name *string
	// DefaultOperator sets the default operator agent; ClearDefaultOperator
	// removes it (the two exclude each other).
	DefaultOperator      *string
	ClearDefaultOperator bool
}

// UpdateSpace renames a space or sets its default operator (space.update:
// owner). It emits space.updated, and access.changed in every channel of
// the space when the operator changed (the operator rule follows it).
func (s *Service) UpdateSpace(ctx context.Context, actor identity.Principal, id string, patch SpacePatch) (chat.Space, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.SpaceUpdate, authz.Resource{Kind: authz.KindSpace, ID: id}); err != nil {
		return chat.Space{}, err
	}
	if patch.DefaultOperator != nil && patch.ClearDefaultOperator {
		return chat.Space{}, problem.Invalid(problem.FieldError{Pointer: "/clear_default_operator", Code: "not_allowed", Detail: "set or clear the default operator, not both"})
	}
	if patch.DefaultOperator != nil {
		if err := s.checkAgent(ctx, *patch.DefaultOperator, "/default_operator_agent_id"); err != nil {
			return chat.Space{}, err
		}
	}
	var out chat.Space
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.patchSpace(ctx, id, patch); err != nil {
			return err
		}
		sp, err := s.chat.GetSpace(ctx, id)
		if err != nil {
			return err
		}
		out = sp
		if err := s.events.Append(ctx, events.Event{Type: events.SpaceUpdated, SpaceID: id, Payload: spacePayload(sp)}); err != nil {
			return err
		}
		if patch.operatorChanged() {
			return s.accessChanged(ctx, authz.KindSpace, id, "space.operator_set", id)
		}
		return nil
	})
	if err != nil {
		return chat.Space{}, problem.From("admin.updateSpace", err)
	}
	return out, nil
}

// operatorChanged reports whether the patch sets or clears the default
// operator.
func (p SpacePatch) operatorChanged() bool {
	return p.DefaultOperator != nil || p.ClearDefaultOperator
}

// patchSpace writes the members of patch that are set to the space id (in
// the caller's transaction): its name and its default operator (the
// empty agent clears it).
func (s *Service) patchSpace(ctx context.Context, id string, patch SpacePatch) error {
	if patch.Name != nil {
		if err := s.w.Chat.RenameSpace(ctx, id, *patch.Name); err != nil {
			return err
		}
	}
	if !patch.operatorChanged() {
		return nil
	}
	agent := ""
	if patch.DefaultOperator != nil {
		agent = *patch.DefaultOperator
	}
	return s.w.Chat.SetDefaultOperator(ctx, id, agent)
}

// UnarchiveSpace lifts the archive of a space (space.unarchive: owner);
// rights come back as the grants say. It emits space.updated and
// access.changed in every channel of the space.
func (s *Service) UnarchiveSpace(ctx context.Context, actor identity.Principal, id string) (chat.Space, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.SpaceUnarchive, authz.Resource{Kind: authz.KindSpace, ID: id}); err != nil {
		return chat.Space{}, err
	}
	var out chat.Space
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.w.Chat.UnarchiveSpace(ctx, id); err != nil {
			return err
		}
		sp, err := s.chat.GetSpace(ctx, id)
		if err != nil {
			return err
		}
		out = sp
		if err := s.events.Append(ctx, events.Event{Type: events.SpaceUpdated, SpaceID: id, Payload: spacePayload(sp)}); err != nil {
			return err
		}
		return s.accessChanged(ctx, authz.KindSpace, id, "space.unarchived", id)
	})
	if err != nil {
		return chat.Space{}, problem.From("admin.unarchiveSpace", err)
	}
	return out, nil
}

// ChannelInput describes a channel to create: name, kind (text or forum),
// the switches that differ from the defaults, and the operator mode
// (inherit when empty) with its agent for mode agent.
type ChannelInput struct {
	Name         string
	Kind         chat.ChannelKind
	Switches     chat.SwitchesPatch
	OperatorMode chat.OperatorMode
	OperatorID   string
}

// CreateChannel creates a channel in space spaceID (channel.create: owner,
// decided on the space) with, for a text channel, its main thread, in one
// unit of work, and emits channel.created in the new channel. Name, kind
// and switches are validated by the chat module as it stores them.
func (s *Service) CreateChannel(ctx context.Context, actor identity.Principal, spaceID string, in ChannelInput) (chat.Channel, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ChannelCreate, authz.Resource{Kind: authz.KindSpace, ID: spaceID}); err != nil {
		return chat.Channel{}, err
	}
	switch in.OperatorMode {
	case "", chat.OperatorInherit, chat.OperatorNone:
		if in.OperatorID != "" {
			return chat.Channel{}, problem.Invalid(problem.FieldError{Pointer: "/operator/agent_id", Code: "not_allowed", Detail: "only mode agent names an agent"})
		}
	case chat.OperatorAgent:
		if err := s.checkAgent(ctx, in.OperatorID, "/operator/agent_id"); err != nil {
			return chat.Channel{}, err
		}
	default:
		return chat.Channel{}, problem.Invalid(problem.FieldError{Pointer: "/operator/mode", Code: "invalid_enum"})
	}
	var out chat.Channel
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		c, err := s.w.Chat.CreateChannel(ctx, chat.NewChannel{SpaceID: spaceID, Name: in.Name, Kind: in.Kind,
			OperatorMode: in.OperatorMode, OperatorAgentID: in.OperatorID, FreeResponse: in.Switches.FreeResponse,
			AllowMentionedAgents: in.Switches.AllowMentionedAgents, AutoThread: in.Switches.AutoThread,
			HistoryBackfillLimit: in.Switches.HistoryBackfillLimit, CreatedBy: actor.ID})
		if err != nil {
			return err
		}
		out = c
		return s.events.Append(ctx, events.Event{Type: events.ChannelCreated, ChannelID: c.ID, Payload: channelPayload(c)})
	})
	if err != nil {
		return chat.Channel{}, problem.From("admin.createChannel", err)
	}
	return out, nil
}

// RenameChannel renames channel id (channel.update: owner) and emits
// channel.updated.
func (s *Service) RenameChannel(ctx context.Context, actor identity.Principal, id, name string) (chat.Channel, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ChannelUpdate, authz.Resource{Kind: authz.KindChannel, ID: id}); err != nil {
		return chat.Channel{}, err
	}
	return s.channelChange(ctx, id, func(ctx context.Context) error { return s.w.Chat.RenameChannel(ctx, id, name) }, "")
}

// UnarchiveChannel lifts the archive of channel id (channel.unarchive:
// owner) and emits channel.updated and access.changed.
func (s *Service) UnarchiveChannel(ctx context.Context, actor identity.Principal, id string) (chat.Channel, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ChannelUnarchive, authz.Resource{Kind: authz.KindChannel, ID: id}); err != nil {
		return chat.Channel{}, err
	}
	return s.channelChange(ctx, id, func(ctx context.Context) error { return s.w.Chat.UnarchiveChannel(ctx, id) }, "channel.unarchived")
}

// channelChange runs fn and emits channel.updated (and access.changed with
// change, when given) in one unit of work.
func (s *Service) channelChange(ctx context.Context, id string, fn func(ctx context.Context) error, change string) (chat.Channel, error) {
	var out chat.Channel
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			return err
		}
		c, err := s.chat.GetChannel(ctx, id)
		if err != nil {
			return err
		}
		out = c
		if err := s.events.Append(ctx, events.Event{Type: events.ChannelUpdated, ChannelID: id, Payload: channelPayload(c)}); err != nil {
			return err
		}
		if change != "" {
			return s.accessChanged(ctx, authz.KindChannel, id, change, id)
		}
		return nil
	})
	if err != nil {
		return chat.Channel{}, problem.From("admin.channelChange", err)
	}
	return out, nil
}
