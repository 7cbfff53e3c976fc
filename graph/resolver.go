// Package graph holds the GraphQL face of Bothy: thin resolvers that
// translate arguments, call one module service and return its result. No
// SQL, rights logic or business rule lives here.
package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"

	"bothy.example.com/bothy/graph/model"
	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/feed"
	"bothy.example.com/bothy/internal/files"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/messaging"
	"bothy.example.com/bothy/internal/platform/problem"
	"bothy.example.com/bothy/internal/runs"
)

// Resolver is the root resolver; it holds the module services. Field
// resolvers read through the loaders of their response (LoadersFor), which
// the executor's PerResponse extension provides.
type Resolver struct {
	Identity *identity.Service
	// Authz decides the rights of the resolvers that call no other module.
	Authz     *authz.Service
	Chat      *chat.UseCases
	Messaging *messaging.Service
	Admin     *admin.Service
	Feed      *feed.Service
	// Fanout decides the events subscription for all its listeners at
	// once; nil decides each alone.
	Fanout *feed.Fanout
	// Tokens re-authenticates the connections' tokens together, once per
	// commit; nil authenticates each alone.
	Tokens *identity.LiveTokens
	Runs   *runs.Service
	// Files stores and reads files.
	Files *files.Service
	// ContextLimits are agent.context_max_bytes and
	// agent.context_message_max_bytes.
	ContextLimits runs.ContextLimits
	// Live are the settings of subscriptions.
	Live Live
}

// caller returns the authenticated principal of the request. The HTTP chain
// refuses unauthenticated GraphQL requests, so a missing principal here is a
// wiring error and answers unauthorized rather than acting anonymously.
func caller(ctx context.Context) (identity.Principal, error) {
	p, ok := identity.FromContext(ctx)
	if !ok {
		return identity.Principal{}, problem.New(problem.Unauthorized, "")
	}
	return p, nil
}

// principalModel renders p as the caller's own view of itself.
func principalModel(p identity.Principal) *model.Principal {
	out := &model.Principal{
		ID:          p.ID,
		Kind:        p.Kind,
		Handle:      p.Handle,
		DisplayName: p.DisplayName,
		Status:      p.Status,
		IsOwner:     p.IsOwner,
		CreatedAt:   p.CreatedAt,
	}
	if p.Kind == identity.KindUser && p.Email != "" {
		e := p.Email
		out.Email = &e
	}
	return out
}

// threadInput converts the GraphQL thread create input.
func threadInput(in model.ThreadCreate) messaging.ThreadInput {
	out := messaging.ThreadInput{Title: deref(in.Title), ParentMessageID: deref(in.ParentMessageID)}
	if in.FirstMessage != nil {
		out.First = messageInput(*in.FirstMessage)
	}
	return out
}

// onlyContext reports whether the current field (Query.run) selects nothing
// but its context (and __typename): the stored getRunContext operation.
func onlyContext(ctx context.Context) bool {
	fields := graphql.CollectFieldsCtx(ctx, nil)
	seen := false
	for _, f := range fields {
		switch f.Name {
		case "context":
			seen = true
		case "__typename":
		default:
			return false
		}
	}
	return seen
}

// eventThread reads thread id for an event's thread field: null when the
// caller may not read it now.
func (r *Resolver) eventThread(ctx context.Context, id string) (*model.Thread, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := r.Chat.Thread(ctx, p, id)
	if err != nil {
		return nil, unreadable(err)
	}
	return threadModel(t), nil
}

// group runs an admin action on a group for the caller and renders it.
func (r *Resolver) group(ctx context.Context, fn func(identity.Principal) (identity.Group, error)) (*model.Group, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	g, err := fn(p)
	if err != nil {
		return nil, err
	}
	return groupModel(g), nil
}

// space runs an admin action on a space for the caller and renders it.
func (r *Resolver) space(ctx context.Context, fn func(identity.Principal) (chat.Space, error)) (*model.Space, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	s, err := fn(p)
	if err != nil {
		return nil, err
	}
	return spaceModel(s), nil
}

// channel runs an admin action on a channel for the caller and renders it.
func (r *Resolver) channel(ctx context.Context, fn func(identity.Principal) (chat.Channel, error)) (*model.Channel, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	c, err := fn(p)
	if err != nil {
		return nil, err
	}
	return channelModel(c), nil
}

func groupModel(g identity.Group) *model.Group {
	members := g.Members
	if members == nil {
		members = []string{}
	}
	return &model.Group{ID: g.ID, Name: g.Name, CreatedAt: g.CreatedAt, MemberIds: members}
}

func tokenModel(t identity.TokenInfo) *model.Token {
	return &model.Token{ID: t.ID, PrincipalID: t.PrincipalID, Kind: t.Kind, Label: t.Label,
		CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt, RevokedAt: t.RevokedAt}
}
