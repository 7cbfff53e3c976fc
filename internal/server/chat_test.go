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
