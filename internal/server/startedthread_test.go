package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"bothy.example.com/bothy/internal/devtools/apitest"
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

// TestStartedThreadsInOneBatch: a page of messages asks for the threads
// they started in one batch, whatever its length: selecting the whole
// thread costs exactly one statement more than selecting its id (the
// threads read; the decision is the same batch), and both name the same
// threads. The server's background work (the sweeper, the listener) can
// only add statements to a read, and on a busy machine a key may miss its
// loader's batch window (a second batch), so each selection's count is the
// least of ten reads.
func TestStartedThreadsInOneBatch(t *testing.T) {
	t.Parallel()
	counter := &apitest.StatementCounter{}
	env := apitest.Start(t, apitest.Options{Tracer: counter})
	main := env.Main("Support/Allgemein")
	for i := range 4 {
		env.MustPost("alex", main, fmt.Sprintf("batch-%d", i), fmt.Sprintf("@lotse question %d", i))
	}
	type page struct {
		Thread struct {
			History struct {
				Nodes []struct {
					StartedThreadID *string `json:"startedThreadId"`
					StartedThread   *struct {
						ID string `json:"id"`
					} `json:"startedThread"`
				} `json:"nodes"`
			} `json:"history"`
		} `json:"thread"`
	}
	read := func(selection string) (page, int64) {
		t.Helper()
		var got page
		least := int64(-1)
		for range 10 {
			before := counter.Count()
			if res := env.GraphQL(env.World.Token("alex"), `query($id: ID!) { thread(id: $id) { history(first: 50) { nodes { `+selection+` } } } }`,
				map[string]any{"id": main}, &got); len(res.Errors) > 0 {
				t.Fatalf("%s: %+v", selection, res.Errors)
			}
			if n := counter.Count() - before; least < 0 || n < least {
				least = n
			}
		}
		return got, least
	}
	ids, idStatements := read("startedThreadId")
	threads, threadStatements := read("startedThread { id }")
	started := 0
	for i, n := range ids.Thread.History.Nodes {
		got := threads.Thread.History.Nodes[i].StartedThread
		if n.StartedThreadID == nil {
			if got != nil {
				t.Fatalf("message %d: startedThread %+v without a startedThreadId", i, got)
			}
			continue
		}
		started++
		if got == nil || got.ID != *n.StartedThreadID {
			t.Fatalf("message %d: startedThread %+v, startedThreadId %s", i, got, *n.StartedThreadID)
		}
	}
	if started != 4 {
		t.Fatalf("%d messages name a started thread, want 4", started)
	}
	if threadStatements != idStatements+1 {
		t.Fatalf("startedThread took %d statements, startedThreadId %d: want exactly one more", threadStatements, idStatements)
	}
}
