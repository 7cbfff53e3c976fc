// Package world builds the example world (docs/design/model.md#example-world)
// through the modules' services. Tests and the demo seed use the
// same builder, so a developer can reproduce in the playground what a test
// does.
package world

import (
	"context"
	"errors"
	"fmt"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
)

// Principal is one principal of the world with its clear-text token.
type Principal struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Token string `json:"token"`
}

// Channel is one channel of the world.
type Channel struct {
	ID           string `json:"id"`
	MainThreadID string `json:"main_thread_id,omitempty"`
}

// World holds the ids and tokens of everything the builder made, in the
// shape bothy seed --json prints and bothy dev writes to world.json.
// Channels are keyed "Space/Channel".
type World struct {
	Principals map[string]Principal `json:"principals"`
	Spaces     map[string]string    `json:"spaces"`
	Channels   map[string]Channel   `json:"channels"`
}

// Channel returns the channel with key "Space/Channel"; it panics on an
// unknown key, which is a mistake in a test.
func (w *World) Channel(key string) Channel {
	c, ok := w.Channels[key]
	if !ok {
		panic("world: no channel " + key)
	}
	return c
}

// Token returns the token of the principal with handle h; it panics on an
// unknown handle, which is a mistake in a test.
func (w *World) Token(h string) string { return w.must(h).Token }

// ID returns the id of the principal with handle h; it panics on an unknown
// handle.
func (w *World) ID(h string) string { return w.must(h).ID }

func (w *World) must(h string) Principal {
	p, ok := w.Principals[h]
	if !ok {
		panic("world: no principal " + h)
	}
	return p
}

type person struct {
	handle, name string
	kind         identity.Kind
	owner        bool
}

// people are the principals of the example world.
var people = []person{
	{"robin", "Robin", identity.KindUser, true},
	{"alex", "Alex", identity.KindUser, false},
	{"sam", "Sam", identity.KindUser, false},
	{"writer", "Writer", identity.KindUser, false},
	{"lotse", "Lotse", identity.KindAgent, false},
	{"texter", "Texter", identity.KindAgent, false},
	{"feedbot", "Feed Bot", identity.KindApp, false},
}

// Services are the module services the builder works through: the world
// is a script of admin operations, the same ones an owner runs through the
// API or the command line.
type Services struct {
	Identity *identity.Service
	Chat     *chat.Service
	Authz    *authz.Service
	Admin    *admin.Service
}

type channelSpec struct {
	space, name   string
	kind          chat.ChannelKind
	mode          chat.OperatorMode
	free, guests  bool
	autoThreadOff bool
}

// channels of the example world; every switch not named has its default.
var channels = []channelSpec{
	{space: "Support", name: "Allgemein", kind: chat.ChannelText, mode: chat.OperatorInherit, free: true, guests: true},
	{space: "Support", name: "Eskalation", kind: chat.ChannelText, mode: chat.OperatorInherit, autoThreadOff: true},
	{space: "Support", name: "Reports", kind: chat.ChannelForum, mode: chat.OperatorNone},
	{space: "Support", name: "Bulletin", kind: chat.ChannelForum, mode: chat.OperatorInherit},
	{space: "Marketing", name: "Kampagnen", kind: chat.ChannelText, mode: chat.OperatorInherit},
	{space: "Marketing", name: "Ideas", kind: chat.ChannelForum, mode: chat.OperatorInherit},
}

type grantSpec struct {
	subject, target string // target: a space name or "Space/Channel"
	level           authz.Level
}

// grants of the example world.
var grants = []grantSpec{
	{"alex", "Support", authz.Trigger},
	{"sam", "Support/Allgemein", authz.Trigger},
	{"sam", "Marketing", authz.Trigger},
	{"writer", "Support/Allgemein", authz.Write},
	{"texter", "Support/Allgemein", authz.Write},
	{"feedbot", "Support/Allgemein", authz.Write},
	{"lotse", "Support/Reports", authz.Write},
}

// ErrExists is returned by Build when the example world is already there.
var ErrExists = errors.New("world: the example world already exists")

// Build creates the example world (docs/design/model.md#example-world)
// through the admin
// operations (Robin is made the owner with the bootstrap, then acts as
// owner for everything else) and returns its ids and tokens. It answers
// ErrExists when the world is already there, and fails when a part of it
// exists without the rest.
func Build(ctx context.Context, svc Services) (*World, error) {
	// A script at the database's side, not a client: it takes no
	// rate-limit tokens; decisions and audit are as for any owner.
	ctx = authz.Unmetered(ctx)
	if _, err := svc.Identity.ByHandle(ctx, "robin"); err == nil {
		if ok, err := svc.Chat.SpaceExists(ctx, "Support"); err == nil && ok {
			return nil, ErrExists
		}
		return nil, fmt.Errorf("world: a principal robin exists but the example world does not: build it on an empty database")
	} else if !errors.Is(err, identity.ErrNotFound) {
		return nil, err
	}
	w := &World{Principals: map[string]Principal{}, Spaces: map[string]string{}, Channels: map[string]Channel{}}
	owner, err := svc.Admin.CreateOwner(ctx, "robin", "Robin", "robin@example.com")
	if err != nil {
		return nil, fmt.Errorf("world: owner robin: %w", err)
	}
	robin := owner.Principal
	w.Principals["robin"] = Principal{ID: robin.ID, Kind: string(robin.Kind), Token: owner.Token.Token}
	noExpiry := time.Duration(0)
	for _, p := range people {
		if p.handle == "robin" {
			continue
		}
		in := admin.PrincipalInput{Kind: p.kind, Handle: p.handle, DisplayName: p.name, IsOwner: p.owner}
		if p.kind == identity.KindUser {
			in.Email = p.handle + "@example.com"
		}
		made, err := svc.Admin.CreatePrincipal(ctx, robin, in)
		if err != nil {
			return nil, fmt.Errorf("world: principal %s: %w", p.handle, err)
		}
		tok := made.Token
		if tok == nil {
			t, err := svc.Admin.CreateToken(ctx, robin, made.Principal.ID, "example world", &noExpiry)
			if err != nil {
				return nil, fmt.Errorf("world: token of %s: %w", p.handle, err)
			}
			tok = &t
		}
		w.Principals[p.handle] = Principal{ID: made.Principal.ID, Kind: string(made.Principal.Kind), Token: tok.Token}
	}
	for _, sp := range []struct{ name, operator string }{{"Support", "lotse"}, {"Marketing", "texter"}} {
		made, err := svc.Admin.CreateSpace(ctx, robin, sp.name, w.ID(sp.operator))
		if err != nil {
			return nil, fmt.Errorf("world: space %s: %w", sp.name, err)
		}
		w.Spaces[sp.name] = made.ID
	}
	for _, c := range channels {
		on, off := true, false
		in := admin.ChannelInput{Name: c.name, Kind: c.kind, OperatorMode: c.mode}
		if c.free {
			in.Switches.FreeResponse = &on
		}
		if c.guests {
			in.Switches.AllowMentionedAgents = &on
		}
		if c.autoThreadOff {
			in.Switches.AutoThread = &off
		}
		made, err := svc.Admin.CreateChannel(ctx, robin, w.Spaces[c.space], in)
		if err != nil {
			return nil, fmt.Errorf("world: channel %s/%s: %w", c.space, c.name, err)
		}
		w.Channels[c.space+"/"+c.name] = Channel{ID: made.ID, MainThreadID: made.MainThreadID}
	}
	for _, g := range grants {
		in := admin.GrantInput{SubjectID: w.ID(g.subject), SubjectKind: authz.SubjectPrincipal, Level: g.level}
		if id, ok := w.Spaces[g.target]; ok {
			in.TargetKind, in.TargetID = authz.KindSpace, id
		} else {
			in.TargetKind, in.TargetID = authz.KindChannel, w.Channel(g.target).ID
		}
		if _, err := svc.Admin.CreateGrant(ctx, robin, in); err != nil {
			return nil, fmt.Errorf("world: grant %s on %s: %w", g.subject, g.target, err)
		}
	}
	return w, nil
}
