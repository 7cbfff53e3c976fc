// Package admin owns the owner actions of the instance: people, agents and
// apps, their tokens, groups, spaces, channels, grants, channel operators,
// switches and archiving. Each is decided by authz (owner only, or a person
// on their own tokens; audited on allow and deny) and written in one unit
// of work with the events that tell clients what changed: access.changed in
// every channel whose rights it changes, space.* and channel.* where a
// space or channel was created or changed.
package admin

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/events"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/db"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// Service is the admin module. It names no table: it decides, then calls
// the owning modules inside one transaction (db.InTx).
type Service struct {
	db     *db.DB
	authz  *authz.Service
	chat   *chat.Service
	ident  *identity.Service
	events *events.Log
	w      Writers
	opts   Options
}

// Writers are the raw writes admin makes once it decided the owner's (or
// the grant holder's) right itself: chat's, identity's and authz's, handed
// over at wiring (internal/modules).
type Writers struct {
	Chat     *chat.Writer
	Identity *identity.Writer
	Authz    *authz.Writer
}

// Options are the admin module's settings.
type Options struct {
	// TokenTTL is token.default_ttl: the lifetime of tokens created without
	// one (zero: no expiry).
	TokenTTL time.Duration
	// PrincipalListDefault and PrincipalListMax bound listPrincipals pages.
	PrincipalListDefault, PrincipalListMax int
	// Runs, when set, applies loss of trigger after every change that can
	// take trigger away (revoked grants, archived channels and spaces,
	// disabled or demoted people, group changes).
	Runs TriggerRechecker
	// Log receives the failures of those re-checks (nil: discarded).
	Log *slog.Logger
}

// TriggerRechecker is the part of the runs module that ends the runs and
// drops the follow-ups of people who lost trigger (runs.Service).
type TriggerRechecker interface {
	RecheckTriggers(ctx context.Context, scope runs.TriggerScope) (int, error)
}

// recheck applies loss of trigger in scope after a committed change, so
// that the runs of people who lost trigger end at once. The change itself
// has committed: a failure here must not turn it into an error answer, and
// loses nothing, because the sweeper re-checks every active run on each
// pass (run.sweep_interval).
func (s *Service) recheck(ctx context.Context, scope runs.TriggerScope) {
	if s.opts.Runs == nil {
		return
	}
	if _, err := s.opts.Runs.RecheckTriggers(context.WithoutCancel(ctx), scope); err != nil && s.opts.Log != nil {
		// Ids only; the sweeper's next pass applies what this one could not.
		s.opts.Log.ErrorContext(ctx, "trigger re-check after a change failed; the sweeper retries it",
			"principal_id", scope.PrincipalID, "channel_id", scope.ChannelID, "space_id", scope.SpaceID, "error", err.Error())
	}
}

// scopeOf is the recheck scope of a grant target.
func scopeOf(kind authz.ResourceKind, id string) runs.TriggerScope {
	if kind == authz.KindSpace {
		return runs.TriggerScope{SpaceID: id}
	}
	return runs.TriggerScope{ChannelID: id}
}

// NewService returns the admin service.
func NewService(txs *db.DB, az *authz.Service, c *chat.Service, ident *identity.Service, ev *events.Log, w Writers, opts Options) *Service {
	if opts.PrincipalListDefault == 0 {
		opts.PrincipalListDefault = 50
	}
	if opts.PrincipalListMax == 0 {
		opts.PrincipalListMax = 200
	}
	return &Service{db: txs, authz: az, chat: c, ident: ident, events: ev, w: w, opts: opts}
}

// accessLost applies loss of trigger to the runs and follow-ups of the
// given people, whose rights may have shrunk (disabled, demoted, removed
// from a group).
func (s *Service) accessLost(ctx context.Context, ids ...string) {
	for _, id := range ids {
		s.recheck(ctx, runs.TriggerScope{PrincipalID: id})
	}
}

// GrantInput is the body of a grant create.
type GrantInput struct {
	SubjectID   string
	SubjectKind authz.SubjectKind
	TargetKind  authz.ResourceKind
	TargetID    string
	Level       authz.Level
	ExpiresAt   *time.Time
}

// CreateGrant stores a grant (grant.create: owner; the target must be
// visible, else 404). The subject must exist; agents and apps hold at most
// write.
func (s *Service) CreateGrant(ctx context.Context, actor identity.Principal, in GrantInput) (authz.Grant, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GrantCreate, authz.Resource{Kind: in.TargetKind, ID: in.TargetID}); err != nil {
		return authz.Grant{}, err
	}
	personOrGroup := true
	switch in.SubjectKind {
	case authz.SubjectPrincipal:
		p, err := s.ident.Get(ctx, in.SubjectID)
		if errors.Is(err, identity.ErrNotFound) {
			return authz.Grant{}, problem.Invalid(problem.FieldError{Pointer: "/subject_id", Code: "invalid_reference"})
		}
		if err != nil {
			return authz.Grant{}, problem.Internal("admin.createGrant: read principal", err)
		}
		personOrGroup = p.Kind == identity.KindUser
	case authz.SubjectGroup:
		if _, err := s.ident.GetGroup(ctx, in.SubjectID); errors.Is(err, identity.ErrGroupNotFound) {
			return authz.Grant{}, problem.Invalid(problem.FieldError{Pointer: "/subject_id", Code: "invalid_reference"})
		} else if err != nil {
			return authz.Grant{}, problem.Internal("admin.createGrant: read group", err)
		}
	}
	var out authz.Grant
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		g, err := s.w.Authz.CreateGrant(ctx, authz.NewGrant{SubjectID: in.SubjectID, SubjectKind: in.SubjectKind,
			SubjectIsPersonOrGroup: personOrGroup, TargetKind: in.TargetKind, TargetID: in.TargetID, Level: in.Level,
			ExpiresAt: in.ExpiresAt, CreatedBy: actor.ID})
		if err != nil {
			return err
		}
		out = g
		return s.accessChanged(ctx, in.TargetKind, in.TargetID, "grant.created", g.ID)
	})
	return out, err
}

// RevokeGrant revokes grant id (grant.revoke: owner). Revoking twice
// answers the grant unchanged.
func (s *Service) RevokeGrant(ctx context.Context, actor identity.Principal, id string) (authz.Grant, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.GrantRevoke, authz.Resource{Kind: authz.KindGrant, ID: id}); err != nil {
		return authz.Grant{}, err
	}
	var out authz.Grant
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		before, err := s.authz.GetGrant(ctx, id)
		if err != nil {
			return problem.Internal("admin.revokeGrant: read grant", err)
		}
		g, err := s.w.Authz.RevokeGrant(ctx, id)
		if err != nil {
			return problem.Internal("admin.revokeGrant: revoke grant", err)
		}
		out = g
		if before.RevokedAt != nil {
			return nil
		}
		return s.accessChanged(ctx, g.TargetKind, g.TargetID, "grant.revoked", g.ID)
	})
	if err == nil {
		s.recheck(ctx, scopeOf(out.TargetKind, out.TargetID))
	}
	return out, err
}

// SetOperator sets the operator mode of channel id (channel.operator.set:
// owner). Mode agent needs an active agent in agentID; other modes take none.
func (s *Service) SetOperator(ctx context.Context, actor identity.Principal, id string, mode chat.OperatorMode, agentID string) (chat.Channel, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ChannelOperatorSet, authz.Resource{Kind: authz.KindChannel, ID: id}); err != nil {
		return chat.Channel{}, err
	}
	switch mode {
	case chat.OperatorAgent:
		p, err := s.ident.Get(ctx, agentID)
		if err != nil || p.Kind != identity.KindAgent {
			return chat.Channel{}, problem.Invalid(problem.FieldError{Pointer: "/agent_id", Code: "invalid_reference", Detail: "must name an agent"})
		}
	case chat.OperatorInherit, chat.OperatorNone:
		if agentID != "" {
			return chat.Channel{}, problem.Invalid(problem.FieldError{Pointer: "/agent_id", Code: "not_allowed", Detail: "only mode agent names an agent"})
		}
	default:
		return chat.Channel{}, problem.Invalid(problem.FieldError{Pointer: "/mode", Code: "invalid_enum"})
	}
	return s.changeChannel(ctx, id, "channel.operator_set", func(ctx context.Context) error {
		return s.w.Chat.SetOperator(ctx, id, mode, agentID)
	})
}

// UpdateSwitches changes the switches of channel id
// (channel.switches.update: owner).
func (s *Service) UpdateSwitches(ctx context.Context, actor identity.Principal, id string, p chat.SwitchesPatch) (chat.Channel, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ChannelSwitchesPatch, authz.Resource{Kind: authz.KindChannel, ID: id}); err != nil {
		return chat.Channel{}, err
	}
	return s.changeChannel(ctx, id, "channel.switches_updated", func(ctx context.Context) error {
		return s.w.Chat.UpdateSwitches(ctx, id, p)
	})
}

// ArchiveChannel archives channel id (channel.archive: owner): from then on
// nobody exceeds read in it.
func (s *Service) ArchiveChannel(ctx context.Context, actor identity.Principal, id string) (chat.Channel, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.ChannelArchive, authz.Resource{Kind: authz.KindChannel, ID: id}); err != nil {
		return chat.Channel{}, err
	}
	return s.changeChannel(ctx, id, "channel.archived", func(ctx context.Context) error {
		return s.w.Chat.ArchiveChannel(ctx, id)
	})
}

// ArchiveSpace archives space id (space.archive: owner).
func (s *Service) ArchiveSpace(ctx context.Context, actor identity.Principal, id string) (chat.Space, error) {
	if _, _, err := s.authz.Authorize(ctx, actor, authz.SpaceArchive, authz.Resource{Kind: authz.KindSpace, ID: id}); err != nil {
		return chat.Space{}, err
	}
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := s.w.Chat.ArchiveSpace(ctx, id); err != nil {
			return problem.Internal("admin.archiveSpace: archive space", err)
		}
		return s.accessChanged(ctx, authz.KindSpace, id, "space.archived", id)
	})
	if err != nil {
		return chat.Space{}, err
	}
	s.recheck(ctx, runs.TriggerScope{SpaceID: id})
	sp, err := s.chat.GetSpace(ctx, id)
	if err != nil {
		return chat.Space{}, problem.Internal("admin.archiveSpace: read space", err)
	}
	return sp, nil
}

func (s *Service) changeChannel(ctx context.Context, id, change string, fn func(ctx context.Context) error) (chat.Channel, error) {
	err := s.db.InTx(ctx, func(ctx context.Context) error {
		if err := fn(ctx); err != nil {
			return problem.From("admin.changeChannel", err)
		}
		return s.accessChanged(ctx, authz.KindChannel, id, change, id)
	})
	if err != nil {
		return chat.Channel{}, err
	}
	s.recheck(ctx, runs.TriggerScope{ChannelID: id})
	c, err := s.chat.GetChannel(ctx, id)
	if err != nil {
		return chat.Channel{}, problem.Internal("admin.changeChannel", err)
	}
	return c, nil
}

// accessChanged emits access.changed in every channel of the target (one
// channel, or every channel of a space). The payload names the change and
// ids only.
func (s *Service) accessChanged(ctx context.Context, kind authz.ResourceKind, targetID, change, subjectID string) error {
	channels := []string{targetID}
	if kind == authz.KindSpace {
		var err error
		if channels, err = s.chat.ChannelsOfSpace(ctx, targetID); err != nil {
			return problem.Internal("admin.accessChanged", err)
		}
	}
	evs := make([]events.Event, len(channels))
	for i, c := range channels {
		evs[i] = events.Event{Type: events.AccessChanged, ChannelID: c,
			Payload: map[string]any{"change": change, "target_kind": string(kind), "target_id": targetID, "id": subjectID}}
	}
	return s.events.Append(ctx, evs...)
}
