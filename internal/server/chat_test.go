package server_test

import (
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/apitest"
)

// TestPlaygroundScenario is the done-when walk of the chat core: post as
// Alex in Support/Allgemein, read the thread as Sam, get 404 as Lotse on
// Marketing — through both faces.
func TestPlaygroundScenario(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	m := env.MustPost("alex", main, "hello", "Hello @sam, the printer is down")
	if m["origin"] != "human" || m["thread_seq"] != float64(1) {
		t.Fatalf("posted %v", m)
	}
	mentions := m["mentions"].([]any)
	if len(mentions) != 1 || mentions[0].(map[string]any)["handle"] != "sam" || mentions[0].(map[string]any)["email"] != nil {
		t.Fatalf("mentions %v", mentions)
	}
	var page struct{ Messages []map[string]any }
	env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages", env.World.Token("sam"), nil).JSON(t, &page)
	if len(page.Messages) != 1 || page.Messages[0]["id"] != m["id"] {
		t.Fatalf("sam reads %v", page.Messages)
	}
	var g struct {
		Thread struct {
			Messages struct {
				Messages []struct {
					ID     string `json:"id"`
					Origin string `json:"origin"`
					Author struct {
						Handle string `json:"handle"`
					} `json:"author"`
				} `json:"messages"`
			} `json:"messages"`
		} `json:"thread"`
	}
	res := env.GraphQL(env.World.Token("sam"), `query($id: ID!) { thread(id: $id) { messages { messages { id origin author { handle } } } } }`, map[string]any{"id": main}, &g)
	if len(res.Errors) > 0 || len(g.Thread.Messages.Messages) != 1 || g.Thread.Messages.Messages[0].Author.Handle != "alex" || g.Thread.Messages.Messages[0].Origin != "HUMAN" {
		t.Fatalf("graphql read: %+v %+v", res.Errors, g)
	}
	r := env.REST(http.MethodGet, "/api/v1/channels/"+env.World.Channel("Marketing/Kampagnen").ID, env.World.Token("lotse"), nil)
	if r.Status != http.StatusNotFound {
		t.Fatalf("lotse on Marketing: %d", r.Status)
	}
}

func TestMoveThread(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	// Writer has no trigger right, so the message starts no run (and no auto
	// thread) and can be the parent of a thread.
	parent := env.MustPost("writer", env.Main("Support/Allgemein"), "m1", "Escalate this")
	r := env.REST(http.MethodPost, "/api/v1/channels/"+env.World.Channel("Support/Allgemein").ID+"/threads", env.World.Token("alex"),
		map[string]any{"parent_message_id": parent["id"], "first_message": map[string]any{"client_msg_id": "t1", "content_md": "Details"}})
	var c struct{ Thread map[string]any }
	r.JSON(t, &c)
	thread := c.Thread["id"].(string)
	target := env.World.Channel("Support/Eskalation").ID
	// Sam has trigger on Allgemein only and cannot see the target: 404.
	if r := env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/move", env.World.Token("sam"), map[string]any{"channel_id": target}); r.Status != http.StatusNotFound {
		t.Fatalf("sam moves: %d %s", r.Status, r.Body)
	}
	// Writer lacks trigger on the source.
	if r := env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/move", env.World.Token("writer"), map[string]any{"channel_id": target}); r.Status != http.StatusForbidden {
		t.Fatalf("writer moves: %d", r.Status)
	}
	if r := env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/move", env.World.Token("alex"), map[string]any{"channel_id": target, "extra": 1}); r.Status != 400 {
		t.Fatalf("unknown member: %d", r.Status)
	}
	r = env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/move", env.World.Token("alex"), map[string]any{"channel_id": target})
	var moved map[string]any
	r.JSON(t, &moved)
	if r.Status != 200 || moved["channel_id"] != target || moved["parent_message_id"] != parent["id"] {
		t.Fatalf("move: %d %v", r.Status, moved)
	}
	if n := env.Count(`SELECT count(*) FROM audit_log WHERE action = 'thread.move' AND decision = 'allow'`); n < 1 {
		t.Fatalf("move not audited")
	}
	if n := env.Count(`SELECT count(*) FROM event_log WHERE type = 'thread.moved'`); n != 2 {
		t.Fatalf("%d thread.moved events, want one per channel", n)
	}
	// Messages of the moved thread now report the target channel.
	var page struct{ Messages []map[string]any }
	env.REST(http.MethodGet, "/api/v1/threads/"+thread+"/messages", env.World.Token("alex"), nil).JSON(t, &page)
	if page.Messages[0]["channel_id"] != target {
		t.Fatalf("message channel after move: %v", page.Messages[0]["channel_id"])
	}
	if r := env.REST(http.MethodPost, "/api/v1/threads/"+env.Main("Support/Allgemein")+"/move", env.World.Token("alex"), map[string]any{"channel_id": target}); r.Status != 409 {
		t.Fatalf("moving a main thread: %d", r.Status)
	}
}

func TestListEventsVisibility(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	env.MustPost("writer", env.Main("Support/Allgemein"), "a", "support")
	env.MustPost("sam", env.Main("Marketing/Kampagnen"), "b", "marketing")
	env.MustPost("alex", env.Main("Support/Eskalation"), "c", "escalation")
	count := func(who string) (int, string) {
		var page struct {
			Events    []map[string]any
			NextAfter string `json:"next_after"`
		}
		r := env.REST(http.MethodGet, "/api/v1/events", env.World.Token(who), nil)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s", who, r.Status, r.Body)
		}
		r.JSON(t, &page)
		return len(page.Events), page.NextAfter
	}
	cases := map[string]int{"robin": 3, "alex": 2, "sam": 2, "lotse": 2, "texter": 2, "writer": 1, "feedbot": 1}
	for who, want := range cases {
		if got, _ := count(who); got != want {
			t.Errorf("%s sees %d events, want %d", who, got, want)
		}
	}
	// The cursor: after the last seq nothing comes and the cursor stays.
	_, next := count("robin")
	var page struct {
		Events    []map[string]any
		NextAfter string `json:"next_after"`
	}
	env.REST(http.MethodGet, "/api/v1/events?after="+next, env.World.Token("robin"), nil).JSON(t, &page)
	if len(page.Events) != 0 || page.NextAfter != next {
		t.Fatalf("after the end: %+v", page)
	}
	if r := env.REST(http.MethodGet, "/api/v1/events?after=abc", env.World.Token("robin"), nil); r.Status != 400 {
		t.Fatalf("bad cursor: %d", r.Status)
	}
	// GraphQL gives the same page.
	var g struct {
		Events struct {
			Events []struct {
				Seq       string         `json:"seq"`
				Type      string         `json:"type"`
				CreatedAt string         `json:"createdAt"`
				ChannelID string         `json:"channelId"`
				Payload   map[string]any `json:"payload"`
			} `json:"events"`
			NextAfter string `json:"nextAfter"`
		} `json:"events"`
	}
	res := env.GraphQL(env.World.Token("alex"), `{ events { events { seq type createdAt channelId payload } nextAfter } }`, nil, &g)
	if len(res.Errors) > 0 || len(g.Events.Events) != 2 || g.Events.Events[0].Payload["content_md"] != "support" || g.Events.Events[0].Payload["trigger_state"] != "failed" {
		t.Fatalf("graphql events: %+v %+v", res.Errors, g)
	}
}
