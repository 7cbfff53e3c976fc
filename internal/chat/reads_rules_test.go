package chat_test

import (
	"context"
	"slices"
	"testing"

	"bothy.example.com/bothy/internal/chat"
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
	uc := env.Modules.ChatUseCases
	readers := map[string][]string{ // the spaces each principal reads
		"robin": {"Marketing", "Support"}, "alex": {"Support"}, "sam": {"Marketing"},
		"writer": nil, "lotse": nil, "texter": nil, "feedbot": nil,
	}
	r := readProbe{uc: uc, missingID: ids.New()}
	for who, spaces := range readers {
		actor := env.Principal(who)
		r.checkChannelReads(t, env, who, actor)
		r.checkSpaceReads(t, env, who, actor, spaces)
	}

	env.SetStatus("sam", identity.StatusDisabled)
	sam := env.Principal("sam")
	r.likeMissing(t, "disabled sam reads space Marketing", sam, r.space, env.World.Spaces["Marketing"])
	r.likeMissing(t, "disabled sam reads channel Kampagnen", sam, r.channel, env.World.Channel("Marketing/Kampagnen").ID)
	r.likeMissing(t, "disabled sam reads the main thread of Allgemein", sam, r.thread, env.Main("Support/Allgemein"))
}

// readProbe reads spaces, channels and threads through chat's use cases
// for TestReadsRefuseHiddenLikeMissing, and compares a refusal with the
// one for missingID, an id that does not exist.
type readProbe struct {
	uc        *chat.UseCases
	missingID string
}

// readFunc is one of chat's reads by id, its answer left out.
type readFunc func(ctx context.Context, actor identity.Principal, id string) error

// space reads the space id as a.
func (r readProbe) space(ctx context.Context, a identity.Principal, id string) error {
	_, err := r.uc.Space(ctx, a, id)
	return err
}

// channel reads the channel id as a.
func (r readProbe) channel(ctx context.Context, a identity.Principal, id string) error {
	_, err := r.uc.Channel(ctx, a, id)
	return err
}

// thread reads the thread id as a.
func (r readProbe) thread(ctx context.Context, a identity.Principal, id string) error {
	_, err := r.uc.Thread(ctx, a, id)
	return err
}

// likeMissing fails unless reading id as actor is refused exactly as
// reading an id that does not exist.
func (r readProbe) likeMissing(t *testing.T, what string, actor identity.Principal, read readFunc, id string) {
	t.Helper()
	ctx := t.Context()
	hidden, missing := read(ctx, actor, id), read(ctx, actor, r.missingID)
	p, q := problem.From("chat.hidden", hidden), problem.From("chat.missing", missing)
	if p == nil || q == nil || p.Code != problem.NotFound || p.Reason != "" || p.Code != q.Code || p.Reason != q.Reason ||
		p.Detail != q.Detail || hidden.Error() != missing.Error() {
		t.Errorf("%s: hidden answers %v, missing %v; want the same bare not_found", what, hidden, missing)
	}
}

// checkChannelReads checks that who reads a channel of the example world,
// and its main thread, exactly when the Channels list names it, and is
// refused every other like a missing id.
func (r readProbe) checkChannelReads(t *testing.T, env *moduletest.Env, who string, actor identity.Principal) {
	t.Helper()
	ctx := t.Context()
	page, err := r.uc.Channels(ctx, actor, "", 100)
	if err != nil {
		t.Fatalf("%s lists: %v", who, err)
	}
	listed := map[string]bool{}
	for _, c := range page.Channels {
		listed[c.ID] = true
	}
	for key, c := range env.World.Channels {
		if !listed[c.ID] {
			r.likeMissing(t, who+" reads channel "+key, actor, r.channel, c.ID)
			if c.MainThreadID != "" {
				r.likeMissing(t, who+" reads the main thread of "+key, actor, r.thread, c.MainThreadID)
			}
			continue
		}
		if err := r.channel(ctx, actor, c.ID); err != nil {
			t.Errorf("%s lists %s but reads %v", who, key, err)
		}
		if c.MainThreadID != "" {
			if err := r.thread(ctx, actor, c.MainThreadID); err != nil {
				t.Errorf("%s lists %s but reads its main thread: %v", who, key, err)
			}
		}
	}
}

// checkSpaceReads checks that who reads exactly the spaces named in
// spaces, and is refused every other like a missing id.
func (r readProbe) checkSpaceReads(t *testing.T, env *moduletest.Env, who string, actor identity.Principal, spaces []string) {
	t.Helper()
	for name, id := range env.World.Spaces {
		if !slices.Contains(spaces, name) {
			r.likeMissing(t, who+" reads space "+name, actor, r.space, id)
			continue
		}
		if sp, err := r.uc.Space(t.Context(), actor, id); err != nil || sp.ID != id || sp.Name != name {
			t.Errorf("%s reads space %s: %+v %v", who, name, sp, err)
		}
	}
}
