// Package world builds the example world of the specification (spec
// world.md) through the modules' services. Tests and the demo seed use the
// same builder, so a developer can reproduce in the playground what a test
// does.
package world

import (
	"context"
	"fmt"

	"bothy.example.com/bothy/internal/identity"
)

// Principal is one principal of the world with its clear-text token.
type Principal struct {
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Token string `json:"token"`
}

// World holds the ids and tokens of everything the builder made, in the
// shape bothy seed --json prints and bothy dev writes to world.json.
type World struct {
	Principals map[string]Principal `json:"principals"`
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

// people are the principals of spec world.md.
var people = []person{
	{"robin", "Robin", identity.KindUser, true},
	{"alex", "Alex", identity.KindUser, false},
	{"sam", "Sam", identity.KindUser, false},
	{"writer", "Writer", identity.KindUser, false},
	{"lotse", "Lotse", identity.KindAgent, false},
	{"texter", "Texter", identity.KindAgent, false},
	{"feedbot", "Feed Bot", identity.KindApp, false},
}

// Build creates the example world on an empty database through ident and
// returns its ids and tokens. It fails when any part already exists.
func Build(ctx context.Context, ident *identity.Service) (*World, error) {
	w := &World{Principals: map[string]Principal{}}
	for _, p := range people {
		np := identity.NewPrincipal{Kind: p.kind, Handle: p.handle, DisplayName: p.name, IsOwner: p.owner}
		if p.kind == identity.KindUser {
			np.Email = p.handle + "@example.com"
		}
		made, err := ident.CreatePrincipal(ctx, nil, np)
		if err != nil {
			return nil, fmt.Errorf("world: principal %s: %w", p.handle, err)
		}
		tok, err := ident.CreateToken(ctx, nil, made, "example world", 0)
		if err != nil {
			return nil, fmt.Errorf("world: token of %s: %w", p.handle, err)
		}
		w.Principals[p.handle] = Principal{ID: made.ID, Kind: string(made.Kind), Token: tok.Token}
	}
	return w, nil
}
