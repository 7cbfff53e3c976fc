package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"bothy.example.com/bothy/internal/devtools/apitest"
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

// readerLoss is a way for sam, the reader, to lose the right to read the
// thread of the loss × path table.
type readerLoss struct {
	name string
	// give prepares sam's right (before the subscription opens); it may
	// return a new token for sam, "" to keep the world's.
	give func(t *testing.T, env *apitest.Env, thread string) (token string, take func())
	// ends says the loss ends the token or the principal: the socket
	// closes 4403 and requests answer 401; otherwise reads answer 404 and
	// the subscription stays, withholding the thread's events.
	ends bool
}

// testReaderLossOnEveryPath is the table of the ways a reader loses the
// right to read a thread (token revoke, token expiry, disable, owner
// demotion, grant revoke, grant expiry, group removal, thread move)
// against the paths that show its content: a REST read, a GraphQL read and
// an open events subscription. Right after the change has answered (or the
// clock passed the expiry), with nothing in between, the reads are refused
// and a message posted in the thread is not delivered. The run paths are
// internal/runs' TestLossOfTriggerOnEveryPath; the agent's stream, the
// revocation cases of testSubscriptionsStopAtRevocation and
// TestAdminDisableEndsPollsAndRuns.
func testReaderLossOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, loss := range readerLosses() {
		t.Run(loss.name, func(t *testing.T) {
			t.Parallel()
			checkReaderLoss(t, loss)
		})
	}
}

// lossGrant gives sam a read grant on Support/Eskalation, with the extra
// members of the grant's body, and returns the grant.
func lossGrant(t *testing.T, env *apitest.Env, extra map[string]any) map[string]any {
	t.Helper()
	body := map[string]any{"subject_id": env.World.ID("sam"), "subject_kind": "principal", "target_kind": "channel",
		"target_id": env.World.Channel("Support/Eskalation").ID, "level": "read"}
	for k, v := range extra {
		body[k] = v
	}
	return env.CreateGrant(t, body)
}

// lossToken makes sam a new token, with a ttl in seconds unless 0, and
// returns its id and secret.
func lossToken(t *testing.T, env *apitest.Env, ttl int) (id, secret string) {
	t.Helper()
	body := map[string]any{"label": "loss"}
	if ttl > 0 {
		body["ttl"] = ttl
	}
	tok := env.MustREST(t, http.MethodPost, "/api/v1/principals/"+env.World.ID("sam")+"/tokens", env.World.Token("robin"), body, http.StatusCreated)
	return tok["id"].(string), tok["token"].(string)
}

// readerLosses are the ways of testReaderLossOnEveryPath in which sam
// loses the right to read the thread; robin, the owner, makes every
// change.
func readerLosses() []readerLoss {
	robin := func(env *apitest.Env) string { return env.World.Token("robin") }
	return []readerLoss{
		{name: "token revoke", ends: true, give: func(t *testing.T, env *apitest.Env, _ string) (string, func()) {
			lossGrant(t, env, nil)
			id, secret := lossToken(t, env, 0)
			return secret, func() { env.MustREST(t, http.MethodDelete, "/api/v1/tokens/"+id, robin(env), nil, http.StatusOK) }
		}},
		{name: "token expiry", ends: true, give: func(t *testing.T, env *apitest.Env, _ string) (string, func()) {
			lossGrant(t, env, nil)
			_, secret := lossToken(t, env, 3600)
			return secret, func() { env.Clock.Advance(3601 * time.Second) }
		}},
		{name: "disable", ends: true, give: func(t *testing.T, env *apitest.Env, _ string) (string, func()) {
			lossGrant(t, env, nil)
			return "", func() {
				env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("sam"), robin(env), map[string]any{"status": "disabled"}, http.StatusOK)
			}
		}},
		{name: "owner demotion", give: func(t *testing.T, env *apitest.Env, _ string) (string, func()) {
			env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("sam"), robin(env), map[string]any{"is_owner": true}, http.StatusOK)
			return "", func() {
				env.MustREST(t, http.MethodPatch, "/api/v1/principals/"+env.World.ID("sam"), robin(env), map[string]any{"is_owner": false}, http.StatusOK)
			}
		}},
		{name: "grant revoke", give: func(t *testing.T, env *apitest.Env, _ string) (string, func()) {
			g := lossGrant(t, env, nil)
			return "", func() {
				env.MustREST(t, http.MethodDelete, "/api/v1/grants/"+g["id"].(string), robin(env), nil, http.StatusOK)
			}
		}},
		{name: "grant expiry", give: func(t *testing.T, env *apitest.Env, _ string) (string, func()) {
			lossGrant(t, env, map[string]any{"expires_at": env.Clock.Now().Add(time.Hour).Format(time.RFC3339)})
			return "", func() { env.Clock.Advance(time.Hour + time.Second) }
		}},
		{name: "group removal", give: func(t *testing.T, env *apitest.Env, _ string) (string, func()) {
			g := env.MustREST(t, http.MethodPost, "/api/v1/groups", robin(env), map[string]any{"name": "Escalation readers"}, http.StatusCreated)
			gid := g["id"].(string)
			env.MustREST(t, http.MethodPost, "/api/v1/groups/"+gid+"/members", robin(env), map[string]any{"principal_id": env.World.ID("sam")}, http.StatusOK)
			env.CreateGrant(t, map[string]any{"subject_id": gid, "subject_kind": "group", "target_kind": "channel",
				"target_id": env.World.Channel("Support/Eskalation").ID, "level": "read"})
			return "", func() {
				env.MustREST(t, http.MethodDelete, "/api/v1/groups/"+gid+"/members/"+env.World.ID("sam"), robin(env), nil, http.StatusOK)
			}
		}},
		{name: "thread move", give: func(t *testing.T, env *apitest.Env, thread string) (string, func()) {
			lossGrant(t, env, nil)
			// A text channel sam has no right on.
			intern := env.MustREST(t, http.MethodPost, "/api/v1/spaces/"+env.World.Spaces["Support"]+"/channels", robin(env),
				map[string]any{"name": "Intern", "kind": "text"}, http.StatusCreated)
			return "", func() {
				env.MustREST(t, http.MethodPost, "/api/v1/threads/"+thread+"/move", robin(env),
					map[string]any{"channel_id": intern["id"]}, http.StatusOK)
			}
		}},
	}
}

// checkReaderLoss runs one row of testReaderLossOnEveryPath: sam reads a
// new thread of Support/Eskalation on every path, loses the right by loss,
// and is refused on every path at once.
func checkReaderLoss(t *testing.T, loss readerLoss) {
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"events.poll_max_wait": "60s"}})
	created := env.MustREST(t, http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Eskalation").ID+"/threads", env.World.Token("robin"),
		map[string]any{"title": "Incident", "first_message": map[string]any{"client_msg_id": "loss-0", "content_md": "the incident"}}, http.StatusCreated)
	thread := created["thread"].(map[string]any)["id"].(string)
	tok, take := loss.give(t, env, thread)
	if tok == "" {
		tok = env.World.Token("sam")
	}
	// Before: every path shows the thread.
	env.MustREST(t, http.MethodGet, "/api/v1/threads/"+thread, tok, nil, http.StatusOK)
	w := dialRaw(t, env, nil)
	w.init(tok)
	w.send(subscribeAfter("s", `subscription($a: String) { events(after: $a) { seq type ... on MessageEvent { messageId threadId } } }`, logEnd(env)))
	seen := env.MustPost("robin", thread, "loss-1", "before the loss")
	for !strings.Contains(string(w.want("next").Payload), seen["id"].(string)) {
	}

	take()

	wantRead := http.StatusNotFound
	if loss.ends {
		wantRead = http.StatusUnauthorized
	}
	wantThreadReadsRefused(t, env, tok, thread, wantRead)
	wantThreadWithheld(t, env, w, thread, loss.ends)
}

// wantThreadReadsRefused checks that REST and GraphQL reads of thread with
// tok are refused at once: REST with wantRead, GraphQL with not_found or
// with wantRead as its status.
func wantThreadReadsRefused(t *testing.T, env *apitest.Env, tok, thread string, wantRead int) {
	t.Helper()
	if r := env.REST(http.MethodGet, "/api/v1/threads/"+thread, tok, nil); r.Status != wantRead {
		t.Fatalf("REST read after the loss: %d, want %d", r.Status, wantRead)
	}
	var g struct {
		Thread *struct{ ID string } `json:"thread"`
	}
	res, err := env.GraphQLDo(tok, `query($t: ID!) { thread(id: $t) { id } }`, map[string]any{"t": thread}, &g)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status == http.StatusOK && (g.Thread != nil || len(res.Errors) != 1 || res.Errors[0].Extensions.Code != "not_found") ||
		res.Status != http.StatusOK && res.Status != wantRead {
		t.Fatalf("GraphQL read after the loss: %d %s %+v", res.Status, res.Data, res.Errors)
	}
}

// wantThreadWithheld checks that the subscription on w withholds the
// thread's next message: it closes (4403, when the loss ends the token or
// the principal) or delivers the barrier, in sam's own space, without it.
func wantThreadWithheld(t *testing.T, env *apitest.Env, w *rawWS, thread string, ends bool) {
	t.Helper()
	hidden := env.MustPost("robin", thread, "loss-2", "after the loss")
	barrier := env.MustPost("robin", env.Main("Marketing/Kampagnen"), "loss-3", "barrier")
	for {
		m, code := w.read(10 * time.Second)
		if code != 0 {
			if !ends || code != 4403 {
				t.Fatalf("subscription closed with %d", code)
			}
			return
		}
		if strings.Contains(string(m.Payload), hidden["id"].(string)) {
			t.Fatalf("the subscription delivered the thread's message after the loss: %s", m.Payload)
		}
		if strings.Contains(string(m.Payload), barrier["id"].(string)) {
			if ends {
				t.Fatalf("a subscription of an ended token or principal delivered %s", m.Payload)
			}
			return
		}
	}
}

// TestLiveRightsOnSubscriptions runs the live-rights cases of open subscriptions.
func TestLiveRightsOnSubscriptions(t *testing.T) {
	t.Parallel()
	t.Run("demotion and disable", testSubscriptionFollowsLiveRights)
	t.Run("token revoked", testSubscriptionsStopAtRevocation)
	t.Run("token expired", testSubscriptionClosesAtTokenExpiry)
	t.Run("reader loss on every path", testReaderLossOnEveryPath)
}
