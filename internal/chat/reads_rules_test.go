package chat_test

import (
	"context"
	"slices"
	"testing"

	"bothy.example.com/bothy/internal/devtools/moduletest"
	"bothy.example.com/bothy/internal/identity"
	"bothy.example.com/bothy/internal/platform/ids"
	"bothy.example.com/bothy/internal/platform/problem"
)

// TestReadsRefuseHiddenLikeMissing pins docs/design/rights.md#not-found-or-forbidden
// on chat's reads (chat.UseCases.Space, Channel, Thread) and their
// agreement with the Channels list, for every principal of the example
// world: a channel is read, and its main thread too, exactly when the
// Channels list names it; every other channel, main thread and space is
// refused with the same bare not_found (no reason) as an id that does not
// exist. A space is read only through a grant on the space or by an owner
// (docs/design/rights.md#effective-level: the operator rule and channel
// grants give rights in channels, not on their space). A disabled
// principal reads nothing, again like a missing id.
func TestReadsRefuseHiddenLikeMissing(t *testing.T) {
	t.Parallel()
	env := moduletest.New(t)
	ctx := t.Context()
	uc := env.Modules.ChatUseCases
	readers := map[string][]string{ // the spaces each principal reads
		"robin": {"Marketing", "Support"}, "alex": {"Support"}, "sam": {"Marketing"},
		"writer": nil, "lotse": nil, "texter": nil, "feedbot": nil,
	}
	missingID := ids.New()
	type read func(ctx context.Context, actor identity.Principal, id string) error
	space := func(ctx context.Context, a identity.Principal, id string) error {
		_, err := uc.Space(ctx, a, id)
		return err
	}
	channel := func(ctx context.Context, a identity.Principal, id string) error {
		_, err := uc.Channel(ctx, a, id)
		return err
	}
	thread := func(ctx context.Context, a identity.Principal, id string) error {
		_, err := uc.Thread(ctx, a, id)
		return err
	}
	// likeMissing fails unless reading id as actor is refused exactly as
	// reading an id that does not exist.
	likeMissing := func(what string, actor identity.Principal, r read, id string) {
		t.Helper()
		hidden, missing := r(ctx, actor, id), r(ctx, actor, missingID)
		p, q := problem.From("chat.hidden", hidden), problem.From("chat.missing", missing)
		if p == nil || q == nil || p.Code != problem.NotFound || p.Reason != "" || p.Code != q.Code || p.Reason != q.Reason ||
			p.Detail != q.Detail || hidden.Error() != missing.Error() {
			t.Errorf("%s: hidden answers %v, missing %v; want the same bare not_found", what, hidden, missing)
		}
	}
	for who, spaces := range readers {
		actor := env.Principal(who)
		page, err := uc.Channels(ctx, actor, "", 100)
		if err != nil {
			t.Fatalf("%s lists: %v", who, err)
		}
		listed := map[string]bool{}
		for _, c := range page.Channels {
			listed[c.ID] = true
		}
		for key, c := range env.World.Channels {
			if !listed[c.ID] {
				likeMissing(who+" reads channel "+key, actor, channel, c.ID)
				if c.MainThreadID != "" {
					likeMissing(who+" reads the main thread of "+key, actor, thread, c.MainThreadID)
				}
				continue
			}
			if err := channel(ctx, actor, c.ID); err != nil {
				t.Errorf("%s lists %s but reads %v", who, key, err)
			}
			if c.MainThreadID != "" {
				if err := thread(ctx, actor, c.MainThreadID); err != nil {
					t.Errorf("%s lists %s but reads its main thread: %v", who, key, err)
				}
			}
		}
		for name, id := range env.World.Spaces {
			if !slices.Contains(spaces, name) {
				likeMissing(who+" reads space "+name, actor, space, id)
				continue
			}
			if sp, err := uc.Space(ctx, actor, id); err != nil || sp.ID != id || sp.Name != name {
				t.Errorf("%s reads space %s: %+v %v", who, name, sp, err)
			}
		}
	}

	env.SetStatus("sam", identity.StatusDisabled)
	sam := env.Principal("sam")
	likeMissing("disabled sam reads space Marketing", sam, space, env.World.Spaces["Marketing"])
	likeMissing("disabled sam reads channel Kampagnen", sam, channel, env.World.Channel("Marketing/Kampagnen").ID)
	likeMissing("disabled sam reads the main thread of Allgemein", sam, thread, env.Main("Support/Allgemein"))
}
