package server_test

import (
	"net/http"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/apitest"
)

// untilMessage reads the subscription's events up to the message.created of
// message id and returns the events before it; it fails on a close or an
// error.
func untilMessage(t *testing.T, sub *jsClient, id string) []wsMessageEvent {
	t.Helper()
	var before []wsMessageEvent
	for {
		var e wsMessageEvent
		sub.event("events", &e)
		if e.Type == "message.created" && e.MessageID == id {
			return before
		}
		before = append(before, e)
	}
}

// testSubscriptionFollowsLiveRights: an open events subscription decides
// every event with the principal as it is when the event is handed out,
// not as it was at connection_init: a demoted owner stops receiving the
// channels only the owner flag let them read, and a disabled principal
// receives nothing more before the socket closes with 4403.
func testSubscriptionFollowsLiveRights(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"events.poll_max_wait": "2s"}})
	robin, samID := env.World.Token("robin"), env.World.ID("sam")
	eskalation, kampagnen := env.Main("Support/Eskalation"), env.Main("Marketing/Kampagnen")
	setOwner := func(owner bool) {
		t.Helper()
		env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+samID, robin, map[string]any{"is_owner": owner}, http.StatusOK)
	}
	setOwner(true)
	sub := subscribeJS(t, env, env.World.Token("sam"), `subscription($a: String) { events(after: $a) { `+wsEventSel+` } }`,
		map[string]any{"a": logEnd(env)})
	sub.connected()

	// As an owner, sam reads Eskalation.
	seen := env.MustPost("robin", eskalation, "live-1", "escalation while sam is an owner")
	untilMessage(t, sub, seen["id"].(string))

	// Demoted: the next message of Eskalation is withheld; a message of
	// Marketing (sam's own space) posted after it still comes.
	setOwner(false)
	if r := env.REST(http.MethodGet, "/api/v1/threads/"+eskalation, env.World.Token("sam"), nil); r.Status != http.StatusNotFound {
		t.Fatalf("the demoted owner reads Eskalation by REST: %d", r.Status)
	}
	hidden := env.MustPost("robin", eskalation, "live-2", "escalation after the demotion")
	barrier := env.MustPost("sam", kampagnen, "live-3", "marketing after the demotion")
	for _, e := range untilMessage(t, sub, barrier["id"].(string)) {
		if e.ThreadID == eskalation || e.MessageID == hidden["id"] || e.ChannelID == env.World.Channel("Support/Eskalation").ID {
			t.Fatalf("the demoted owner received %+v", e)
		}
	}

	// Disabled: a message sam could read is not delivered; the socket
	// closes with 4403.
	env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+samID, robin, map[string]any{"status": "disabled"}, http.StatusOK)
	env.MustPost("robin", kampagnen, "live-4", "marketing after the disable")
	if m := sub.next(10 * time.Second); m["closed"] == nil {
		t.Fatalf("the disabled principal received %s before the close", dump(m))
	} else if string(m["closed"]) != "4403" {
		t.Fatalf("closed with %s, want 4403", m["closed"])
	}
}

// testSubscriptionsStopAtRevocation: once a token revoke has answered, an
// events and an agentEvents subscription of that token hand out nothing
// more (a message and an invocation that follow are withheld) and close
// with 4403.
func testSubscriptionsStopAtRevocation(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"events.poll_max_wait": "2s"}})
	robin := env.World.Token("robin")
	newToken := func(handle string) (id, secret string) {
		t.Helper()
		tok := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+env.World.ID(handle)+"/tokens", robin, map[string]any{"label": "live"}, http.StatusCreated)
		return tok["id"].(string), tok["token"].(string)
	}
	alexID, alexTok := newToken("alex")
	lotseID, lotseTok := newToken("lotse")
	allgemein := env.Main("Support/Allgemein")

	events := subscribeJS(t, env, alexTok, `subscription($a: String) { events(after: $a) { `+wsEventSel+` } }`, map[string]any{"a": logEnd(env)})
	events.connected()
	// From an explicit cursor: "now" would be read when the subscription
	// starts, which may be after the post below.
	_, cursor := env.Poll(t, "lotse", "", 0)
	agent := subscribeJS(t, env, lotseTok, `subscription($a: String) { agentEvents(after: $a) { seq type } }`, map[string]any{"a": cursor})
	agent.connected()
	// Both deliver before the revocation.
	env.MustPost("alex", allgemein, "rv-1", "@lotse are you there?")
	// What the first post committed (its auto thread too) is read up to a
	// barrier, so that whatever comes next came after the revocation.
	barrier := env.MustPost("alex", env.Main("Support/Eskalation"), "rv-barrier", "barrier")
	untilMessage(t, events, barrier["id"].(string))
	var inv struct {
		Seq  string `json:"seq"`
		Type string `json:"type"`
	}
	agent.event("agentEvents", &inv)
	if inv.Type != "agent.invocation" {
		t.Fatalf("agent event %+v", inv)
	}

	env.MustREST(t, http.MethodDelete, "/api/v1/tokens/"+alexID, robin, nil, http.StatusOK)
	env.MustREST(t, http.MethodDelete, "/api/v1/tokens/"+lotseID, robin, nil, http.StatusOK)
	env.MustPost("sam", allgemein, "rv-2", "@lotse after the revocation")
	for name, sub := range map[string]*jsClient{"events": events, "agentEvents": agent} {
		if m := sub.next(10 * time.Second); m["closed"] == nil {
			t.Fatalf("%s of a revoked token received %s before the close", name, dump(m))
		} else if string(m["closed"]) != "4403" {
			t.Fatalf("%s closed with %s, want 4403", name, m["closed"])
		}
	}
}

// testSubscriptionClosesAtTokenExpiry: a connection whose token expires
// closes with 4403 when the clock reaches the expiry, by a timer set at
// connection_init: nothing commits after the clock moves and the periodic
// re-check is 30 s away (events.poll_max_wait 60s), so only the expiry can
// close it within the test's wait.
func testSubscriptionClosesAtTokenExpiry(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"events.poll_max_wait": "60s"}})
	tok := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+env.World.ID("alex")+"/tokens", env.World.Token("robin"),
		map[string]any{"label": "expiring", "ttl": 3600}, http.StatusCreated)
	sub := subscribeJS(t, env, tok["token"].(string), `subscription($a: String) { events(after: $a) { `+wsEventSel+` } }`, map[string]any{"a": logEnd(env)})
	sub.connected()
	seen := env.MustPost("alex", env.Main("Support/Eskalation"), "exp-1", "before the expiry")
	untilMessage(t, sub, seen["id"].(string))

	env.Clock.Advance(3601 * time.Second)
	if m := sub.next(10 * time.Second); m["closed"] == nil {
		t.Fatalf("the connection of an expired token received %s", dump(m))
	} else if string(m["closed"]) != "4403" {
		t.Fatalf("closed with %s, want 4403", m["closed"])
	}
}

// TestLiveRightsOnSubscriptions runs the live-rights cases of open subscriptions.
func TestLiveRightsOnSubscriptions(t *testing.T) {
	t.Parallel()
	t.Run("demotion and disable", testSubscriptionFollowsLiveRights)
	t.Run("token revoked", testSubscriptionsStopAtRevocation)
	t.Run("token expired", testSubscriptionClosesAtTokenExpiry)
}
