package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"bothy.example.com/bothy/internal/apitest"
)

func TestIdempotentCreate(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	first := env.MustPost("alex", main, "c-1", "Hello from Alex")
	events := env.Count(`SELECT count(*) FROM event_log`)

	r := env.Post("alex", main, "c-1", "Hello from Alex")
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %q %s", r.Status, r.Header.Get("Idempotent-Replay"), r.Body)
	}
	var again map[string]any
	r.JSON(t, &again)
	if again["id"] != first["id"] || again["thread_seq"] != first["thread_seq"] || again["created_at"] != first["created_at"] {
		t.Fatalf("replay is not the original: %v vs %v", again, first)
	}
	if n := env.Count(`SELECT count(*) FROM event_log`); n != events {
		t.Fatalf("replay published %d events", n-events)
	}
	if n := env.Count(`SELECT count(*) FROM messages WHERE thread_id = $1`, main); n != 1 {
		t.Fatalf("%d messages stored", n)
	}

	conflict := env.Post("alex", main, "c-1", "Something else")
	if conflict.Status != http.StatusConflict {
		t.Fatalf("reuse with another body: %d %s", conflict.Status, conflict.Body)
	}
	if p := conflict.Problem(t); p.Code != "conflict" || p.Reason != "idempotency_key_reused" {
		t.Fatalf("problem %+v", p)
	}
	// Another author may use the same client_msg_id.
	env.MustPost("sam", main, "c-1", "Hello from Sam")

	// Concurrent duplicates store exactly one message.
	var wg sync.WaitGroup
	statuses := make([]int, 10)
	for i := range statuses {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r, err := env.PostDo("alex", main, "dup", "Twice?")
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = r.Status
		}(i)
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("concurrent duplicate answered %d", s)
		}
	}
	if created != 1 || env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = 'dup'`) != 1 {
		t.Fatalf("concurrent duplicates: %d created, %d stored", created, env.Count(`SELECT count(*) FROM messages WHERE client_msg_id = 'dup'`))
	}
}

func TestOriginCannotBeForged(t *testing.T) {
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

func TestReopenOrder(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	// Reports has no operator, so nothing here starts a run.
	ch := env.World.Channel("Support/Reports").ID
	r := env.REST(http.MethodPost, "/api/v1/channels/"+ch+"/threads", env.World.Token("alex"),
		map[string]any{"title": "Printer", "first_message": map[string]any{"client_msg_id": "t1", "content_md": "The printer is down"}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create thread: %d %s", r.Status, r.Body)
	}
	var created struct {
		Thread       map[string]any `json:"thread"`
		FirstMessage map[string]any `json:"first_message"`
	}
	r.JSON(t, &created)
	thread := created.Thread["id"].(string)
	if created.Thread["title_source"] != "user" || created.FirstMessage["thread_seq"] != float64(1) {
		t.Fatalf("created %+v", created)
	}
	if c := env.REST(http.MethodPost, "/api/v1/threads/"+thread+"/close", env.World.Token("alex"), nil); c.Status != 200 {
		t.Fatalf("close: %d %s", c.Status, c.Body)
	}
	before := env.Count(`SELECT coalesce(max(seq), 0) FROM event_log`)
	m := env.MustPost("alex", thread, "s1", "Still broken")
	if m["thread_seq"] != float64(3) {
		t.Fatalf("message after reopen has thread_seq %v, want 3", m["thread_seq"])
	}
	rows, err := env.Pool.Query(t.Context(), `SELECT type, coalesce(payload->>'system_code', ''), coalesce(payload->>'kind', '') FROM event_log WHERE seq > $1 ORDER BY seq`, before)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var typ, code, kind string
		rows.Scan(&typ, &code, &kind)
		got = append(got, strings.Join(strings.Fields(typ+" "+code+" "+kind), " "))
	}
	want := []string{"thread.reopened post", "message.created thread.reopened system", "message.created text"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var th map[string]any
	env.REST(http.MethodGet, "/api/v1/threads/"+thread, env.World.Token("alex"), nil).JSON(t, &th)
	if th["state"] != "open" || th["last_seq"] != float64(3) {
		t.Fatalf("thread after reopen %v", th)
	}
	sys := env.REST(http.MethodGet, "/api/v1/threads/"+thread+"/messages", env.World.Token("alex"), nil)
	var page struct{ Messages []map[string]any }
	sys.JSON(t, &page)
	if len(page.Messages) != 3 || page.Messages[1]["origin"] != "system" || page.Messages[1]["author"].(map[string]any)["handle"] != "alex" {
		t.Fatalf("history %v", page.Messages)
	}
}

func TestTombstones(t *testing.T) {
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	// Writer's message starts no run, so no auto thread takes its first line
	// as a title (auto titles stay with their thread; see DECISIONS).
	m := env.MustPost("writer", main, "d1", "secret plans for @sam")
	id := m["id"].(string)
	// Sam may not delete Writer's message; Writer may.
	if r := env.REST(http.MethodDelete, "/api/v1/messages/"+id, env.World.Token("sam"), nil); r.Status != http.StatusForbidden {
		t.Fatalf("sam deletes writer's message: %d", r.Status)
	}
	r := env.REST(http.MethodDelete, "/api/v1/messages/"+id, env.World.Token("writer"), nil)
	if r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	check := func(where string, msg map[string]any) {
		t.Helper()
		if msg["content_md"] != "" || msg["deleted"] != true || len(msg["mentions"].([]any)) != 0 {
			t.Fatalf("%s: not a tombstone: %v", where, msg)
		}
	}
	var got map[string]any
	r.JSON(t, &got)
	check("delete answer", got)
	env.REST(http.MethodGet, "/api/v1/messages/"+id, env.World.Token("sam"), nil).JSON(t, &got)
	check("getMessage", got)
	var page struct{ Messages []map[string]any }
	env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages", env.World.Token("sam"), nil).JSON(t, &page)
	check("history", page.Messages[0])
	var evs struct{ Events []map[string]any }
	env.REST(http.MethodGet, "/api/v1/events", env.World.Token("sam"), nil).JSON(t, &evs)
	seen := 0
	for _, e := range evs.Events {
		if p, _ := e["payload"].(map[string]any); p != nil && p["id"] == id {
			check("event "+e["type"].(string), p)
			seen++
		}
	}
	if seen != 2 {
		t.Fatalf("saw %d events of the message, want created and deleted", seen)
	}
	if n := env.Count(`SELECT count(*) FROM event_log WHERE payload::text LIKE '%secret plans%'`); n != 0 {
		t.Fatalf("content left in %d events", n)
	}
}

func TestHistoryCutsListContent(t *testing.T) {
	env := apitest.Start(t, apitest.Options{Config: map[string]string{"message.list_content_max_bytes": "10"}})
	main := env.Main("Support/Allgemein")
	long := "Grüße aus dem Support, Alex"
	m := env.MustPost("alex", main, "l1", long)
	var page struct{ Messages []map[string]any }
	env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages", env.World.Token("sam"), nil).JSON(t, &page)
	if got := page.Messages[0]["content_md"]; got != "Grüße au" || page.Messages[0]["content_truncated"] != true {
		t.Fatalf("history content %q truncated=%v", got, page.Messages[0]["content_truncated"])
	}
	var single map[string]any
	env.REST(http.MethodGet, "/api/v1/messages/"+m["id"].(string), env.World.Token("sam"), nil).JSON(t, &single)
	if single["content_md"] != long || single["content_truncated"] != nil {
		t.Fatalf("single read cut: %v", single)
	}
	// Paging by thread_seq.
	for i := 0; i < 4; i++ {
		env.MustPost("alex", main, fmt.Sprintf("p%d", i), fmt.Sprintf("page %d", i))
	}
	var p1 struct {
		Messages  []map[string]any
		NextAfter *int `json:"next_after"`
	}
	env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages?limit=2", env.World.Token("sam"), nil).JSON(t, &p1)
	if len(p1.Messages) != 2 || p1.NextAfter == nil || *p1.NextAfter != 2 {
		t.Fatalf("first page %+v", p1)
	}
	var p2 struct {
		Messages  []map[string]any
		NextAfter *int `json:"next_after"`
	}
	env.REST(http.MethodGet, fmt.Sprintf("/api/v1/threads/%s/messages?limit=10&after=%d", main, *p1.NextAfter), env.World.Token("sam"), nil).JSON(t, &p2)
	if len(p2.Messages) != 3 || p2.NextAfter != nil || p2.Messages[0]["thread_seq"] != float64(3) {
		t.Fatalf("second page %+v", p2)
	}
	if r := env.REST(http.MethodGet, "/api/v1/threads/"+main+"/messages?limit=0", env.World.Token("sam"), nil); r.Status != 400 {
		t.Fatalf("limit 0: %d", r.Status)
	}
}
