// Package world builds the example world (docs/design/model.md#example-world)
// through the modules' services. Tests and the demo seed use the
// same builder, so a developer can reproduce in the playground what a test
// does.
package world

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"bothy.example.com/bothy/internal/admin"
	"bothy.example.com/bothy/internal/authz"
	"bothy.example.com/bothy/internal/chat"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/modules"
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

// Person is a principal of a world: a person (KindUser, with the address
// handle@example.com), an agent or an app. Owner makes a person an owner;
// the first owner of a Spec is made with the bootstrap and acts for the
// rest of the build.
type Person struct {
	Handle, Name string
	Kind         identity.Kind
	Owner        bool
}

// people are the principals of the example world.
var people = []Person{
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

// Of returns the services of an assembled set of modules (a server's
// Modules). The world depends on the wiring and never the other way round:
// the product's wiring and server do not link the example world, which
// `bothy dev`, `bothy seed` and the test harnesses add after assembly.
func Of(set *modules.Set) Services {
	return Services{Identity: set.Identity, Chat: set.Chat, Authz: set.Authz, Admin: set.Admin}
}

// Space is a space of a world with its default operator agent (a handle;
// empty for none).
type Space struct {
	Name, Operator string
}

// ChannelSpec is a channel of a world: its space, name, kind, operator
// mode and the switches that differ from the defaults (free response,
// mentioned agents as guests, automatic threads off).
type ChannelSpec struct {
	Space, Name   string
	Kind          chat.ChannelKind
	Mode          chat.OperatorMode
	Free, Guests  bool
	AutoThreadOff bool
}

// channels of the example world; every switch not named has its default.
var channels = []ChannelSpec{
	{Space: "Support", Name: "Allgemein", Kind: chat.ChannelText, Mode: chat.OperatorInherit, Free: true, Guests: true},
	{Space: "Support", Name: "Eskalation", Kind: chat.ChannelText, Mode: chat.OperatorInherit, AutoThreadOff: true},
	{Space: "Support", Name: "Reports", Kind: chat.ChannelForum, Mode: chat.OperatorNone},
	{Space: "Support", Name: "Bulletin", Kind: chat.ChannelForum, Mode: chat.OperatorInherit},
	{Space: "Marketing", Name: "Kampagnen", Kind: chat.ChannelText, Mode: chat.OperatorInherit},
	{Space: "Marketing", Name: "Ideas", Kind: chat.ChannelForum, Mode: chat.OperatorInherit},
}

// GrantSpec is a grant of a world: a principal's handle, its target (a
// space's name or "Space/Channel") and the level.
type GrantSpec struct {
	Subject, Target string
	Level           authz.Level
}

// grants of the example world.
var grants = []GrantSpec{
	{"alex", "Support", authz.Trigger},
	{"sam", "Support/Allgemein", authz.Trigger},
	{"sam", "Marketing", authz.Trigger},
	{"writer", "Support/Allgemein", authz.Write},
	{"texter", "Support/Allgemein", authz.Write},
	{"feedbot", "Support/Allgemein", authz.Write},
	{"lotse", "Support/Reports", authz.Write},
}

// Spec describes a world: its principals, spaces, channels and grants.
type Spec struct {
	People   []Person
	Spaces   []Space
	Channels []ChannelSpec
	Grants   []GrantSpec
}

// Example is the example world (docs/design/model.md#example-world).
var Example = Spec{People: people, Spaces: []Space{{"Support", "lotse"}, {"Marketing", "texter"}}, Channels: channels, Grants: grants}

// ErrExists is returned by Build when the example world is already there.
var ErrExists = errors.New("world: the example world already exists")

// Build creates the example world (docs/design/model.md#example-world)
// through the admin operations (Robin is made the owner with the
// bootstrap, then acts as owner for everything else) and returns its ids
// and tokens. It answers ErrExists when the world is already there, and
// fails when a part of it exists without the rest.
func Build(ctx context.Context, svc Services) (*World, error) {
	if _, err := svc.Identity.ByHandle(authz.Unmetered(ctx), "robin"); err == nil {
		if ok, err := svc.Chat.SpaceExists(authz.Unmetered(ctx), "Support"); err == nil && ok {
			return nil, ErrExists
		}
		return nil, fmt.Errorf("world: a principal robin exists but the example world does not: build it on an empty database")
	} else if !errors.Is(err, identity.ErrNotFound) {
		return nil, err
	}
	return BuildSpec(ctx, svc, Example)
}

// BuildSpec creates the world of spec through the admin operations, on a
// database without principals (its first owner is made with the
// bootstrap, then acts as owner for everything else), and returns its ids
// and tokens. Every person's address is handle@example.com; every
// principal gets a token without expiry.
//
// Errors: spec names no owner; any admin operation's refusal (a handle
// taken, a name invalid).
func BuildSpec(ctx context.Context, svc Services, spec Spec) (*World, error) {
	// A script at the database's side, not a client: it takes no
	// rate-limit tokens; decisions and audit are as for any owner.
	ctx = authz.Unmetered(ctx)
	w := &World{Principals: map[string]Principal{}, Spaces: map[string]string{}, Channels: map[string]Channel{}}
	owner, err := buildPeople(ctx, svc, spec.People, w)
	if err != nil {
		return nil, err
	}
	for _, sp := range spec.Spaces {
		op := ""
		if sp.Operator != "" {
			op = w.ID(sp.Operator)
		}
		made, err := svc.Admin.CreateSpace(ctx, owner, sp.Name, op)
		if err != nil {
			return nil, fmt.Errorf("world: space %s: %w", sp.Name, err)
		}
		w.Spaces[sp.Name] = made.ID
	}
	if err := buildChannels(ctx, svc, owner, spec.Channels, w); err != nil {
		return nil, err
	}
	for _, g := range spec.Grants {
		if err := grant(ctx, svc, owner, w, g); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// buildPeople creates the principals of a spec, the first owner with the
// bootstrap, and returns that owner.
func buildPeople(ctx context.Context, svc Services, ps []Person, w *World) (identity.Principal, error) {
	first := slices.IndexFunc(ps, func(p Person) bool { return p.Owner })
	if first < 0 {
		return identity.Principal{}, errors.New("world: the spec names no owner")
	}
	o := ps[first]
	made, err := svc.Admin.CreateOwner(ctx, o.Handle, o.Name, o.Handle+"@example.com")
	if err != nil {
		return identity.Principal{}, fmt.Errorf("world: owner %s: %w", o.Handle, err)
	}
	owner := made.Principal
	w.Principals[o.Handle] = Principal{ID: owner.ID, Kind: string(owner.Kind), Token: made.Token.Token}
	noExpiry := time.Duration(0)
	for i, p := range ps {
		if i == first {
			continue
		}
		in := admin.PrincipalInput{Kind: p.Kind, Handle: p.Handle, DisplayName: p.Name, IsOwner: p.Owner}
		if p.Kind == identity.KindUser {
			in.Email = p.Handle + "@example.com"
		}
		made, err := svc.Admin.CreatePrincipal(ctx, owner, in)
		if err != nil {
			return identity.Principal{}, fmt.Errorf("world: principal %s: %w", p.Handle, err)
		}
		tok := made.Token
		if tok == nil {
			t, err := svc.Admin.CreateToken(ctx, owner, made.Principal.ID, "example world", &noExpiry)
			if err != nil {
				return identity.Principal{}, fmt.Errorf("world: token of %s: %w", p.Handle, err)
			}
			tok = &t
		}
		w.Principals[p.Handle] = Principal{ID: made.Principal.ID, Kind: string(made.Principal.Kind), Token: tok.Token}
	}
	return owner, nil
}

// buildChannels creates the channels of a spec in their spaces.
func buildChannels(ctx context.Context, svc Services, owner identity.Principal, cs []ChannelSpec, w *World) error {
	for _, c := range cs {
		on, off := true, false
		in := admin.ChannelInput{Name: c.Name, Kind: c.Kind, OperatorMode: c.Mode}
		if c.Free {
			in.Switches.FreeResponse = &on
		}
		if c.Guests {
			in.Switches.AllowMentionedAgents = &on
		}
		if c.AutoThreadOff {
			in.Switches.AutoThread = &off
		}
		made, err := svc.Admin.CreateChannel(ctx, owner, w.Spaces[c.Space], in)
		if err != nil {
			return fmt.Errorf("world: channel %s/%s: %w", c.Space, c.Name, err)
		}
		w.Channels[c.Space+"/"+c.Name] = Channel{ID: made.ID, MainThreadID: made.MainThreadID}
	}
	return nil
}

// grant gives g in world w as owner.
func grant(ctx context.Context, svc Services, owner identity.Principal, w *World, g GrantSpec) error {
	in := admin.GrantInput{SubjectID: w.ID(g.Subject), SubjectKind: authz.SubjectPrincipal, Level: g.Level}
	if id, ok := w.Spaces[g.Target]; ok {
		in.TargetKind, in.TargetID = authz.KindSpace, id
	} else {
		in.TargetKind, in.TargetID = authz.KindChannel, w.Channel(g.Target).ID
	}
	if _, err := svc.Admin.CreateGrant(ctx, owner, in); err != nil {
		return fmt.Errorf("world: grant %s on %s: %w", g.Subject, g.Target, err)
	}
	return nil
}
