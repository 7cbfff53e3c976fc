package feed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"bothy.example.com/bothy/internal/apitest"
)

// wsMsg is a graphql-transport-ws message.
type wsMsg struct {
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// listener is one WebSocket connection with one events subscription.
type listener struct {
	t testing.TB
	c *websocket.Conn
}

// listen connects as token and subscribes to the events after the end of
// the log.
func listen(t testing.TB, env *apitest.Env, token string) *listener {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, strings.Replace(env.URL, "http", "ws", 1)+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(websocket.StatusNormalClosure, "") })
	l := &listener{t: t, c: c}
	l.send(wsMsg{Type: "connection_init", Payload: json.RawMessage(`{"Authorization":"Bearer ` + token + `"}`)})
	if m := l.read(); m.Type != "connection_ack" {
		t.Fatalf("want connection_ack, got %+v", m)
	}
	end := env.Count(`SELECT coalesce(max(seq), 0)::int FROM event_log`)
	p, _ := json.Marshal(map[string]any{"query": `subscription($a: String) { events(after: $a) { seq type ... on MessageEvent { messageId message { id contentMd } } } }`,
		"variables": map[string]any{"a": fmt.Sprint(end)}})
	l.send(wsMsg{ID: "s", Type: "subscribe", Payload: p})
	return l
}

func (l *listener) send(m wsMsg) {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wsjson.Write(ctx, l.c, m); err != nil {
		l.t.Fatal(err)
	}
}

func (l *listener) read() wsMsg {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var m wsMsg
	if err := wsjson.Read(ctx, l.c, &m); err != nil {
		l.t.Fatal(err)
	}
	return m
}

// until reads events up to the message.created of message id.
func (l *listener) until(id string) {
	l.t.Helper()
	for {
		m := l.read()
		if m.Type != "next" {
			l.t.Fatalf("want next, got %+v", m)
		}
		if strings.Contains(string(m.Payload), `"messageId":"`+id+`"`) {
			if !strings.Contains(string(m.Payload), `"contentMd":"for everybody listening"`) {
				l.t.Fatalf("the message came without its content: %s", m.Payload)
			}
			return
		}
	}
}

// TestFanoutStatementsDoNotGrowWithListeners: a message posted while 1,
// then 12 connections of three people listen to the events (each selecting
// the message's content) costs the same number of statements, its delivery
// to all of them included: the replica reads the new events once, decides
// them, re-authenticates the connections' tokens and reads the message for
// all listeners together.
func TestFanoutStatementsDoNotGrowWithListeners(t *testing.T) {
	t.Parallel()
	counter := &apitest.StatementCounter{}
	env := apitest.Start(t, apitest.Options{Tracer: counter})
	allgemein := env.Main("Support/Allgemein")
	people := []string{"alex", "sam", "robin"}
	var ls []*listener
	// post has writer (write, no trigger: no run) post in Allgemein, which
	// all three read, and returns the statements from the post to the
	// message's arrival at every listener.
	post := func(key string) int64 {
		t.Helper()
		before := counter.Count()
		m := env.MustPost("writer", allgemein, key, "for everybody listening")
		for _, l := range ls {
			l.until(m["id"].(string))
		}
		return counter.Count() - before
	}
	measure := func(n int) int64 {
		for len(ls) < n {
			ls = append(ls, listen(t, env, env.World.Token(people[len(ls)%len(people)])))
		}
		// The first post after new listeners joined brings each of them
		// into the shared window; the second is the one measured.
		post(fmt.Sprintf("warm-%d", n))
		return post(fmt.Sprintf("measured-%d", n))
	}
	one := measure(1)
	twelve := measure(12)
	if twelve != one {
		t.Fatalf("a message cost %d statements with 1 listener and %d with 12:\n%s", one, twelve,
			strings.Join(counter.Since(counter.Count()-twelve), "\n"))
	}
}
