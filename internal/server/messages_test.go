package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
)

func TestOriginCannotBeForged(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	bodies := map[string]map[string]any{
		"origin":      {"client_msg_id": "f1", "content_md": "hi", "origin": "human"},
		"system_code": {"client_msg_id": "f2", "content_md": "hi", "system_code": "thread.reopened"},
		"kind system": {"client_msg_id": "f3", "content_md": "hi", "kind": "system"},
		"kind run":    {"client_msg_id": "f4", "content_md": "hi", "kind": "run"},
	}
	for name, body := range bodies {
		for _, who := range []string{"alex", "lotse", "feedbot"} {
			r := env.REST(http.MethodPost, "/api/v1/threads/"+main+"/messages", env.World.Token(who), body)
			if r.Status != http.StatusBadRequest || r.Problem(t).Code != "validation_failed" {
				t.Fatalf("%s by %s: %d %s", name, who, r.Status, r.Body)
			}
		}
	}
	if n := env.Count(`SELECT count(*) FROM messages`); n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	// GraphQL refuses the same at the schema.
	res := env.GraphQL(env.World.Token("alex"), `mutation($t: ID!) { createMessage(threadId: $t, input: {clientMsgId: "g", contentMd: "x", kind: SYSTEM}) { replayed } }`,
		map[string]any{"t": main}, nil)
	if len(res.Errors) == 0 || res.Errors[0].Extensions.Code != "validation_failed" {
		t.Fatalf("GraphQL kind SYSTEM: %+v", res.Errors)
	}
	for who, origin := range map[string]string{"alex": "human", "lotse": "agent", "feedbot": "app"} {
		m := env.MustPost(who, main, "o-"+who, "origin of "+who)
		if m["origin"] != origin || m["author"].(map[string]any)["kind"] == nil {
			t.Fatalf("%s wrote origin %v", who, m["origin"])
		}
	}
}

// TestIdempotentReplayOnTheWire: a replayed create answers 200 with
// Idempotent-Replay and the original message on REST (for a message and
// for a whole thread create), and a reused client_msg_id with another body
// is a 409 problem. The idempotency rule itself is TestIdempotentCreate in
// internal/messaging.
func TestIdempotentReplayOnTheWire(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	first := env.MustPost("alex", main, "c-1", "Hello from Alex")
	r := env.Post("alex", main, "c-1", "Hello from Alex")
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %q %s", r.Status, r.Header.Get("Idempotent-Replay"), r.Body)
	}
	var again map[string]any
	r.JSON(t, &again)
	if again["id"] != first["id"] || again["thread_seq"] != first["thread_seq"] || again["created_at"] != first["created_at"] {
		t.Fatalf("replay is not the original: %v vs %v", again, first)
	}
	conflict := env.Post("alex", main, "c-1", "Something else")
	if conflict.Status != http.StatusConflict {
		t.Fatalf("reuse with another body: %d %s", conflict.Status, conflict.Body)
	}
	if p := conflict.Problem(t); p.Code != "conflict" || p.Reason != "idempotency_key_reused" {
		t.Fatalf("problem %+v", p)
	}
	// The whole thread create replays alike.
	path := "/api/v1/channels/" + env.World.Channel("Support/Bulletin").ID + "/threads"
	body := map[string]any{"first_message": map[string]any{"client_msg_id": "p1", "content_md": "Weekly report\nAll good."}}
	var created, replayed struct{ Thread map[string]any }
	c := env.REST(http.MethodPost, path, env.World.Token("alex"), body)
	if c.Status != http.StatusCreated {
		t.Fatalf("create thread: %d %s", c.Status, c.Body)
	}
	c.JSON(t, &created)
	c = env.REST(http.MethodPost, path, env.World.Token("alex"), body)
	if c.Status != http.StatusOK || c.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("thread replay: %d %q %s", c.Status, c.Header.Get("Idempotent-Replay"), c.Body)
	}
	c.JSON(t, &replayed)
	if replayed.Thread["id"] != created.Thread["id"] {
		t.Fatalf("thread replay %v, want %v", replayed.Thread, created.Thread)
	}
}

// TestTombstoneOnTheWire: a delete is 403 for another author and answers
// the tombstone (empty content, no mentions, deleted) on REST. Where the
// tombstone shows and that no content stays behind is TestTombstones in
// internal/messaging.
func TestTombstoneOnTheWire(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	m := env.MustPost("writer", env.Main("Support/Allgemein"), "d1", "secret plans for @sam")
	id := m["id"].(string)
	if r := env.REST(http.MethodDelete, "/api/v1/messages/"+id, env.World.Token("sam"), nil); r.Status != http.StatusForbidden {
		t.Fatalf("sam deletes writer's message: %d", r.Status)
	}
	r := env.REST(http.MethodDelete, "/api/v1/messages/"+id, env.World.Token("writer"), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	var got map[string]any
	r.JSON(t, &got)
	if got["content_md"] != "" || got["deleted"] != true || len(got["mentions"].([]any)) != 0 {
		t.Fatalf("delete answer is not a tombstone: %v", got)
	}
}

// TestHistoryPagingOnTheWire: REST history marks cut content, pages with
// limit and next_after, and refuses limit=0. The cut and paging rules are
// TestHistoryCutsListContent in internal/messaging.
func TestHistoryPagingOnTheWire(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"message.list_content_max_bytes": "10"}})
	main := env.Main("Support/Allgemein")
	env.MustPost("alex", main, "l1", "Grüße aus dem Support, Alex")
	env.MustPost("alex", main, "l2", "short")
	var p1 struct {
		Messages  []map[string]any
		NextAfter *int `json:"next_after"`
	}
	env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages?limit=1", env.World.Token("sam"), nil).JSON(t, &p1)
	if len(p1.Messages) != 1 || p1.Messages[0]["content_md"] != "Grüße au" || p1.Messages[0]["content_truncated"] != true || p1.NextAfter == nil || *p1.NextAfter != 1 {
		t.Fatalf("first page %+v", p1)
	}
	var p2 struct {
		Messages  []map[string]any
		NextAfter *int `json:"next_after"`
	}
	env.REST(http.MethodGet, fmt.Sprintf("/api/v1/threads/%s/messages?limit=10&after=%d", main, *p1.NextAfter), env.World.Token("sam"), nil).JSON(t, &p2)
	if len(p2.Messages) != 1 || p2.NextAfter != nil || p2.Messages[0]["thread_seq"] != float64(2) || p2.Messages[0]["content_truncated"] != nil {
		t.Fatalf("second page %+v", p2)
	}
	if r := env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages?limit=0", env.World.Token("sam"), nil); r.Status != 400 {
		t.Fatalf("limit 0: %d", r.Status)
	}
}
