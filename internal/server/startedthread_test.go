package server_test

import (
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/apitest"
)

// TestMessageStartedThread: a triggering message leads to the thread it
// started, for readers of that thread only; other messages have none.
func TestMessageStartedThread(t *testing.T) {
	t.Parallel()
	env := apitest.Start(t, apitest.Options{})
	main := env.Main("Support/Allgemein")
	m := env.MustPost("alex", main, "st-1", "@lotse the printer is down")
	plain := env.MustPost("writer", main, "st-2", "just a note") // writer has no trigger right
	type thread struct {
		ID              string  `json:"id"`
		ChannelID       string  `json:"channelId"`
		ParentMessageID *string `json:"parentMessageId"`
	}
	type answer struct {
		A struct {
			StartedThread *thread `json:"startedThread"`
		} `json:"a"`
		B struct {
			StartedThread *thread `json:"startedThread"`
		} `json:"b"`
	}
	const q = `query($a: ID!, $b: ID!) { a: message(id: $a) { startedThread { id channelId parentMessageId } } b: message(id: $b) { startedThread { id channelId parentMessageId } } }`
	vars := map[string]any{"a": m["id"], "b": plain["id"]}
	var got answer
	if res := env.GraphQL(env.World.Token("alex"), q, vars, &got); len(res.Errors) > 0 {
		t.Fatalf("errors %+v", res.Errors)
	}
	st := got.A.StartedThread
	if st == nil || st.ParentMessageID == nil || *st.ParentMessageID != m["id"] || st.ID == main || got.B.StartedThread != nil {
		t.Fatalf("alex: %+v", got)
	}
	// Moved where Sam cannot read, the thread is null for Sam (who still
	// reads the message) and unchanged for Alex.
	target := env.World.Channel("Support/Eskalation").ID
	if r := env.REST(http.MethodPost, "/api/v1/threads/"+st.ID+"/move", env.World.Token("alex"), map[string]any{"channel_id": target}); r.Status != 200 {
		t.Fatalf("move: %d %s", r.Status, r.Body)
	}
	var sam answer
	if res := env.GraphQL(env.World.Token("sam"), q, vars, &sam); len(res.Errors) > 0 {
		t.Fatalf("sam errors %+v", res.Errors)
	}
	if sam.A.StartedThread != nil {
		t.Fatalf("sam sees a thread it may not read: %+v", sam.A.StartedThread)
	}
	got = answer{}
	if res := env.GraphQL(env.World.Token("alex"), q, vars, &got); len(res.Errors) > 0 || got.A.StartedThread == nil || got.A.StartedThread.ChannelID != target {
		t.Fatalf("alex after move: %+v %+v", res.Errors, got)
	}
}
