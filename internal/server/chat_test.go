package server_test

import (
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

// TestPlaygroundScenario is the done-when walk of the chat core: post as
// Alex in Support/Allgemein, read the thread as Sam, get 404 as Lotse on
// Marketing — through both faces.
func TestPlaygroundScenario(t *testing.T) {
	t.Parallel()
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

// TestListEventsSameOnBothFaces: REST and GraphQL listEvents give a
// principal the same events, with the message payload and its trigger
// state; REST refuses a cursor that is not a number with 400. Who sees
// which events is TestListEventsVisibility in internal/feed.
func TestListEventsSameOnBothFaces(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	env.MustPost("writer", env.Main("Support/Allgemein"), "a", "support")
	env.MustPost("sam", env.Main("Marketing/Kampagnen"), "b", "marketing")
	env.MustPost("alex", env.Main("Support/Eskalation"), "c", "escalation")
	var page struct {
		Events []struct {
			Seq string `json:"seq"`
		}
		NextAfter string `json:"next_after"`
	}
	r := env.REST(http.MethodGet, "/api/v1/events", env.World.Token("alex"), nil)
	if r.Status != 200 {
		t.Fatalf("alex: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &page)
	if r := env.REST(http.MethodGet, "/api/v1/events?after=abc", env.World.Token("robin"), nil); r.Status != 400 {
		t.Fatalf("bad cursor: %d", r.Status)
	}
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
	if len(page.Events) != 2 || g.Events.NextAfter != page.NextAfter {
		t.Fatalf("REST page %+v, GraphQL next %q", page, g.Events.NextAfter)
	}
	for i, e := range page.Events {
		if g.Events.Events[i].Seq != e.Seq {
			t.Fatalf("event %d: REST seq %s, GraphQL seq %s", i, e.Seq, g.Events.Events[i].Seq)
		}
	}
}
